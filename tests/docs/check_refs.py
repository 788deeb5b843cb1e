#!/usr/bin/env python3
"""The repo stands alone: every reference in it resolves inside it.

Fails (exit 1, one line per finding) on
  1. a reference to a document that is not in the repo (the project's outside specification,
     design and style notes, by folder, name or section; the patterns are OUTSIDE below), a
     bare section sign not named by an RFC, "A.4.4"-style section numbers of an outside
     document, "Part C", an item of the issue tracker ("issue 17");
  2. a relative markdown link in docs/**.md or a top-level *.md whose file or #anchor does
     not exist;
  3. a rule ID ([CQ-12], [IW-TERM]) that docs/ndk-rules.md / docs/iwarp-notes.md does not
     define, or a "page.md#anchor" / "path/page.md" named in any tracked file that does not
     resolve;
  4. a page under docs/ that docs/README.md does not link.

Usage: check_refs.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

# bench/results/history.md is a dated diary kept verbatim; this file names the patterns.
EXEMPT = {"bench/results/history.md", "tests/docs/check_refs.py"}

URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
OUTSIDE = [
    (re.compile(r"spec[/]"), "a document of the outside spec folder"),
    (re.compile(r"\bspec (§|[A-C]\.\d|\d+\.\d|Part [A-C]\b)"), "a section of 'the spec'"),
    (re.compile(r"\bdesign\s§"), "a section of the outside design document"),
    (re.compile(r"\b(design|style|users|ndkpi|iwarp)[.]md\b"), "an outside document"),
    (re.compile(r"[.][.]/shared\b"), "the steering folder beside the repo"),
    (re.compile(r"\bPart [A-C]\b"), "a part of an outside document"),
    (re.compile(r"\b[Ii]ssues? #?\d+|\bproject issue\b"), "an item of the issue tracker"),
]
# A section sign is fine only when an RFC (or an MS-XXXX open specification) is named before
# it on the same line; "A.4.4" / "B.3" only right after an RFC number ("RFC 3720 B.4").
SECTION = re.compile(r"§")
NAMED_BEFORE_SECTION = re.compile(r"(RFC ?\d{3,4}|MS-[A-Z0-9]+)")
APPENDIX = re.compile(r"(?<![\w.])([AB]\.\d+(?:\.\d+)*)(?![\w.])")
RFC_APPENDIX = re.compile(r"RFC ?\d{3,4},? (appendix )?$", re.I)

RULE_ID = re.compile(
    r"\[((?:OBJ|LIFE|CLOSE|EP|CB|ADP|POST|FLAG|DEFER|CQ|MEM|CONN|DISC|SRQ|RDMA|EXT|ASYNC|STAT"
    r"|ABI)-\d+)\]")
IW_ID = re.compile(r"\[(IW-[A-Z0-9]+(?:-[A-Z0-9]+)*)\]")
MD_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MD_PATH = re.compile(r"(?<![\w/.-])((?:\.\./|\./)?[\w][\w./-]*\.md)(#[\w-]+)?(?![\w-])")
ANCHOR_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        return sorted(p for p in out.decode().split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return sorted(files)


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return None


def slug(text):
    """GitHub's heading anchor: link text kept, markup and punctuation dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def strip_code(md):
    """Markdown without fenced blocks and inline code (links there are not links)."""
    md = re.sub(r"^(```|~~~).*?^\1[^\n]*$", lambda m: "\n" * m.group(0).count("\n"), md,
                flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", md)


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        text = read_text(path) or ""
        found, seen = set(ANCHOR_ID.findall(text)), {}
        body = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
        for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", body, flags=re.M):
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
        _anchor_cache[path] = found
    return _anchor_cache[path]


def resolve(root, rel_file, target):
    """A path named in rel_file: relative to its folder, the repo root, or docs/."""
    here = os.path.dirname(rel_file)
    for base in (here, "", "docs"):
        p = os.path.normpath(os.path.join(root, base, target))
        if os.path.exists(p) and os.path.commonpath([p, root]) == root:
            return p
    return None


def check_outside(rel, text, problems):
    for n, line in enumerate(text.split("\n"), 1):
        bare = URL.sub("", line)
        for rx, what in OUTSIDE:
            if rx.search(bare):
                problems.append(f"{rel}:{n}: reference to {what}: {line.strip()}")
                break
        else:
            for m in SECTION.finditer(bare):
                if not NAMED_BEFORE_SECTION.search(bare[:m.start()]):
                    problems.append(f"{rel}:{n}: '§' of no RFC: {line.strip()}")
                    break
            for m in APPENDIX.finditer(bare):
                if not RFC_APPENDIX.search(bare[:m.start()]):
                    problems.append(f"{rel}:{n}: section {m.group(1)} of an outside "
                                    f"document: {line.strip()}")
                    break


def check_ids(root, rel, text, rule_ids, iw_ids, problems):
    for n, line in enumerate(text.split("\n"), 1):
        for m in RULE_ID.finditer(line):
            if m.group(1).lower() not in rule_ids:
                problems.append(f"{rel}:{n}: rule {m.group(1)} is not in docs/ndk-rules.md")
        for m in IW_ID.finditer(line):
            if m.group(1).lower() not in iw_ids:
                problems.append(f"{rel}:{n}: note {m.group(1)} is not in docs/iwarp-notes.md")
        if rel.endswith(".md"):
            line = re.sub(r"\]\([^)]*\)", "]()", line)  # link targets: check_links' job
        for m in MD_PATH.finditer(URL.sub("", line)):
            target, frag = m.group(1), m.group(2)
            p = resolve(root, rel, target)
            if p is None:
                problems.append(f"{rel}:{n}: {target} does not exist")
            elif frag and frag[1:] not in anchors(p):
                problems.append(f"{rel}:{n}: {target}{frag}: no such anchor")


def check_links(root, rel, text, problems):
    for n, line in enumerate(strip_code(text).split("\n"), 1):
        for m in MD_LINK.finditer(line):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # http:, https:, mailto:
            path, _, frag = target.partition("#")
            full = os.path.join(root, rel) if not path else \
                os.path.normpath(os.path.join(root, os.path.dirname(rel), path))
            if not os.path.exists(full):
                problems.append(f"{rel}:{n}: link to {target}: no such file")
            elif frag and full.endswith(".md") and frag not in anchors(full):
                problems.append(f"{rel}:{n}: link to {target}: no such anchor")


def check_index(root, files, problems):
    index = os.path.join(root, "docs", "README.md")
    text = strip_code(read_text(index) or "")
    linked = set()
    for m in MD_LINK.finditer(text):
        path = m.group(1).partition("#")[0]
        if path and not re.match(r"[a-z][a-z0-9+.-]*:", path, re.I):
            linked.add(os.path.normpath(os.path.join("docs", path)))
    for rel in files:
        if rel.startswith("docs/") and rel.endswith(".md") and rel != "docs/README.md":
            if os.path.normpath(rel) not in linked:
                problems.append(f"{rel}: not linked from docs/README.md")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.realpath(sys.argv[1])
    files = [f for f in tracked_files(root) if os.path.isfile(os.path.join(root, f))]
    rule_ids = anchors(os.path.join(root, "docs", "ndk-rules.md"))
    iw_ids = anchors(os.path.join(root, "docs", "iwarp-notes.md"))
    problems = []
    if not any(i.startswith("cq-") for i in rule_ids) or "iw-term" not in iw_ids:
        problems.append("docs/ndk-rules.md or docs/iwarp-notes.md: rule anchors not found")
    checked = 0
    for rel in files:
        if rel in EXEMPT:
            continue
        text = read_text(os.path.join(root, rel))
        if text is None or "\0" in text:
            continue
        checked += 1
        check_outside(rel, text, problems)
        check_ids(root, rel, text, rule_ids, iw_ids, problems)
        top_md = rel.endswith(".md") and "/" not in rel
        if top_md or (rel.startswith("docs/") and rel.endswith(".md")):
            check_links(root, rel, text, problems)
    check_index(root, files, problems)
    for p in problems:
        print(p)
    print(f"check_refs: {checked} files, {len(rule_ids)} rule anchors, {len(iw_ids)} note "
          f"anchors, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
