#!/usr/bin/env python3
"""Writes the man page (deploy/debian/callback-proxy.1) with a CONFIGURATION section made from
docs/reference.md's key tables, before SEE ALSO: every key with its type, default and environment
variable, so the installed page cannot drift from the reference. Used by scripts/package.

  scripts/man-keys.py docs/reference.md deploy/debian/callback-proxy.1 > OUT"""
import re
import sys


def plain(cell):
    """Markdown cell text as roff text: no backticks, emphasis or link targets; roff escapes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell)
    text = text.replace("`", "").replace("**", "").replace("\\|", "|")
    text = text.replace("\\", "\\e").replace("-", "\\-")
    # Everything beyond ASCII as groff's named Unicode escapes (en dashes, ellipses, ×).
    return "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in text).strip()


def rows(reference):
    """The configuration tables' rows: key | type | default | environment | meaning."""
    for line in open(reference, encoding="utf-8"):
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) == 4:  # a row that leaves its meaning to the rows below it
            cells.append("")
        if len(cells) != 5 or not (cells[3] == "" or cells[3].startswith("`CALLBACK_PROXY_")):
            continue
        yield cells


def section(reference):
    # Left-adjusted: the variables' long names leave nothing to justify with.
    out = [".SH CONFIGURATION", ".ad l",
           "Every key of the configuration file, with its type and default, and the environment variable that",
           "overrides it; what each means is in",
           ".IR /usr/share/doc/callback\\-proxy/reference.md.gz .",
           "Lists take YAML lists (or comma\\-separated values in the environment)."]
    for key, kind, default, variable, _ in rows(reference):
        out.append(".TP")
        out.append(".B " + plain(key))
        detail = plain(kind)
        if default:
            detail += "; default: " + plain(default)
        out.append(("\\&" if detail[:1] in ".'" else "") + detail)
        if variable:
            out += [".br", "environment: " + plain(variable)]
    out.append(".ad b")
    return out


def main():
    reference, page = sys.argv[1], sys.argv[2]
    lines = open(page, encoding="utf-8").read().splitlines()
    at = lines.index(".SH SEE ALSO")
    print("\n".join(lines[:at] + section(reference) + lines[at:]))


if __name__ == "__main__":
    main()
