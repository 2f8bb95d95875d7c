// SPDX-License-Identifier: MIT
// A small strict JSON reader for the trace tests: enough to check that a
// file is valid JSON and to walk its objects (no dependency on a library).
#ifndef MORI_TESTS_TRACE_JSON_H
#define MORI_TESTS_TRACE_JSON_H

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mori_test {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  bool Has(const std::string &key) const { return kind == kObject && fields.count(key); }
  const Json &operator[](const std::string &key) const {
    auto it = fields.find(key);
    if (kind != kObject || it == fields.end()) throw std::runtime_error("no field " + key);
    return it->second;
  }

  // Throws std::runtime_error naming the offset of the first fault.
  static Json Parse(const std::string &s) {
    size_t at = 0;
    Json v = Value(s, at);
    Space(s, at);
    if (at != s.size()) Fail(at, "text after the value");
    return v;
  }

 private:
  [[noreturn]] static void Fail(size_t at, const std::string &why) {
    throw std::runtime_error("JSON at offset " + std::to_string(at) + ": " + why);
  }
  static void Space(const std::string &s, size_t &at) {
    while (at < s.size() && (s[at] == ' ' || s[at] == '\n' || s[at] == '\r' || s[at] == '\t')) at++;
  }
  static void Expect(const std::string &s, size_t &at, const char *word) {
    for (const char *w = word; *w; w++, at++)
      if (at >= s.size() || s[at] != *w) Fail(at, std::string("expected ") + word);
  }
  static std::string String(const std::string &s, size_t &at) {
    std::string out;
    if (s[at] != '"') Fail(at, "expected a string");
    for (at++;; at++) {
      if (at >= s.size()) Fail(at, "unterminated string");
      char c = s[at];
      if (c == '"') break;
      if ((unsigned char)c < 0x20) Fail(at, "control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (++at >= s.size()) Fail(at, "unterminated escape");
      switch (s[at]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (at + 4 >= s.size()) Fail(at, "short \\u escape");
          unsigned code = (unsigned)std::strtoul(s.substr(at + 1, 4).c_str(), nullptr, 16);
          out += code < 0x80 ? (char)code : '?';
          at += 4;
          break;
        }
        default: Fail(at, "unknown escape");
      }
    }
    at++;
    return out;
  }
  static Json Value(const std::string &s, size_t &at) {
    Space(s, at);
    if (at >= s.size()) Fail(at, "expected a value");
    Json v;
    char c = s[at];
    if (c == '{') {
      v.kind = kObject;
      at++;
      Space(s, at);
      if (at < s.size() && s[at] == '}') return at++, v;
      for (;;) {
        Space(s, at);
        std::string key = String(s, at);
        Space(s, at);
        Expect(s, at, ":");
        if (v.fields.count(key)) Fail(at, "duplicate key " + key);
        v.fields[key] = Value(s, at);
        Space(s, at);
        if (at < s.size() && s[at] == ',') { at++; continue; }
        Expect(s, at, "}");
        return v;
      }
    }
    if (c == '[') {
      v.kind = kArray;
      at++;
      Space(s, at);
      if (at < s.size() && s[at] == ']') return at++, v;
      for (;;) {
        v.items.push_back(Value(s, at));
        Space(s, at);
        if (at < s.size() && s[at] == ',') { at++; continue; }
        Expect(s, at, "]");
        return v;
      }
    }
    if (c == '"') {
      v.kind = kString;
      v.text = String(s, at);
      return v;
    }
    if (c == 't') return Expect(s, at, "true"), v.kind = kBool, v.boolean = true, v;
    if (c == 'f') return Expect(s, at, "false"), v.kind = kBool, v;
    if (c == 'n') return Expect(s, at, "null"), v;
    // A number: -?digits(.digits)?([eE][+-]?digits)?
    size_t start = at;
    if (s[at] == '-') at++;
    auto digits = [&]() {
      size_t from = at;
      while (at < s.size() && s[at] >= '0' && s[at] <= '9') at++;
      if (at == from) Fail(at, "expected digits");
    };
    digits();
    if (at < s.size() && s[at] == '.') at++, digits();
    if (at < s.size() && (s[at] == 'e' || s[at] == 'E')) {
      at++;
      if (at < s.size() && (s[at] == '+' || s[at] == '-')) at++;
      digits();
    }
    v.kind = kNumber;
    v.number = std::strtod(s.substr(start, at - start).c_str(), nullptr);
    return v;
  }
};

}  // namespace mori_test

#endif
