# SPDX-License-Identifier: MIT
"""Files made from a template by replacing @KEY@ markers."""

def mori_expand_template(name, template, out, substitutions, **kwargs):
    """`out`: `template` with every @KEY@ replaced by its value in
    `substitutions` ({"KEY": value}; a value may be a select() of strings).
    Values go into a sed expression: no '/' or quote in them."""
    cmd = "sed"
    for key, value in substitutions.items():
        if type(value) == "int":
            value = str(value)
        cmd = cmd + " -e 's/@" + key + "@/" + value + "/g'"
    native.genrule(
        name = name,
        srcs = [template],
        outs = [out],
        cmd = cmd + " $< > $@",
        **kwargs
    )
