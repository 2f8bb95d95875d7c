# SPDX-License-Identifier: MIT
"""mori_install_tree: the install tree for C users as one tarball:
include/ (every public header the libraries export: the files under some
package's include/mori/), lib/libmori.so, bin/mori_launch and the files
given in `files` (destination paths)."""

def _mori_install_tree_impl(ctx):
    entries = {}  # destination -> File
    for dep in ctx.attr.header_deps:
        for f in dep[CcInfo].compilation_context.headers.to_list():
            path = f.short_path
            i = path.find("/include/mori/")
            if i < 0:
                continue
            dest = path[i + 1:]
            if dest in entries and entries[dest].short_path != path:
                fail("two headers install as %s: %s and %s" % (dest, entries[dest].short_path, path))
            entries[dest] = f
    entries["lib/libmori.so"] = ctx.file.lib
    entries["bin/mori_launch"] = ctx.file.launcher
    for target, dest in ctx.attr.files.items():
        files = target.files.to_list()
        if len(files) != 1:
            fail("%s: want one file, got %d" % (target.label, len(files)))
        entries[dest] = files[0]
    out = ctx.actions.declare_file(ctx.attr.name + ".tar.gz")
    lines = []
    for dest in sorted(entries.keys()):
        lines.append("%s %s" % (entries[dest].path, dest))
    manifest = ctx.actions.declare_file(ctx.attr.name + ".manifest")
    ctx.actions.write(manifest, "\n".join(lines) + "\n")
    ctx.actions.run_shell(
        inputs = [manifest] + entries.values(),
        outputs = [out],
        command = """
set -eu
stage=$(mktemp -d)
while read -r src dest; do
  mkdir -p "$stage/$(dirname "$dest")"
  cp -L "$src" "$stage/$dest"
  case "$dest" in bin/*|lib/*.so) chmod 755 "$stage/$dest" ;; *) chmod 644 "$stage/$dest" ;; esac
done < {manifest}
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -czf {out} .
rm -rf "$stage"
""".format(manifest = manifest.path, out = out.path),
        mnemonic = "MoriInstallTree",
        progress_message = "Packing the mori install tree",
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

mori_install_tree = rule(
    implementation = _mori_install_tree_impl,
    attrs = {
        "header_deps": attr.label_list(providers = [CcInfo]),
        "lib": attr.label(allow_single_file = True, mandatory = True),
        "launcher": attr.label(allow_single_file = True, mandatory = True),
        "files": attr.label_keyed_string_dict(allow_files = True),
    },
)
