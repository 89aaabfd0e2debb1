#!/usr/bin/env python3
"""Checks that every citation of the docs in the sources points at something that exists.

A comment in Sources/ (or Package.swift) cites a doc as `docs/PATH.md`, optionally followed by a
section: a quoted title (`docs/operations.md, "Counter fields of a hash"`, several joined by
commas or "and"), or a number (`docs/protocol.md §4`, `§3–4`, `§4, §6`). A comment's lines are
read as one text, so a title may wrap. The check fails (exit 1, each broken citation listed with
its file and line) when the doc does not exist, a quoted title is no heading of it (a `#` line, or
a paragraph that opens with the title in bold, `**Title.**`; the heading may go on after the
title, with a date in parentheses or a subtitle after a colon or dash), or a numbered section has no
`## N.` heading. A citation of a file outside the repository (DESIGN.md) fails too.

The docs and the README are also read for citations of files outside the repository.

usage: check-doc-citations.py [ROOT]    (ROOT: the repository, default the current directory)
       check-doc-citations.py --self-test
"""
import os
import re
import sys

PATH = re.compile(r"(?<![\w/])(\.\./shared/)?((?:docs/)[\w./-]+\.md|DESIGN\.md)")
# What may follow a path: `, "Title"`, ` "Title"`, `: "Title"`, and more titles after `,`/`and`.
TITLE = re.compile(r'\s*(?:,|:)?\s*(?:and\s+)?\\?"([^"\\]{2,120})\\?"')
SECTION = re.compile(r"\s*(?:,\s*)?§\s*(\d+)(?:\s*[–-]\s*(\d+))?")


def comment_blocks(path):
    """Yields (first line number, text) for each run of consecutive `//` comment lines."""
    block, start = [], 0
    with open(path, encoding="utf-8") as source:
        for number, line in enumerate(source, 1):
            stripped = line.strip()
            at = stripped.find("//")
            if at == 0:
                if not block:
                    start = number
                block.append(stripped.lstrip("/").strip())
                continue
            if block:
                yield start, " ".join(block)
                block = []
            if at > 0:   # a comment after code on the line
                yield number, stripped[at:].lstrip("/").strip()
    if block:
        yield start, " ".join(block)


def headings(doc):
    """The titles and section numbers of a doc: its `#` headings and bold paragraph leads."""
    titles, numbers = set(), set()
    with open(doc, encoding="utf-8") as text:
        for line in text:
            heading = re.match(r"^#+\s+(.*?)\s*$", line)
            if heading:
                title = heading.group(1)
                titles.add(title)
                number = re.match(r"^(\d+)\.\s*(.*)$", title)
                if number:
                    numbers.add(int(number.group(1)))
                    titles.add(number.group(2))
                continue
            lead = re.match(r"^\*\*(.+?)\*\*", line.strip())
            if lead:
                titles.add(lead.group(1).rstrip(".:"))
    return titles, numbers


def cites(heading, name):
    """Whether heading `heading` is the section cited as `name`: the same, or the name followed by
    what a heading adds after it (a date in parentheses, a subtitle after a colon or a dash)."""
    if heading == name:
        return True
    return heading.startswith(name) and heading[len(name)] in " (:.,;—–-"


def check(root):
    """Every broken citation under `root`, and how many citations there are."""
    files = [os.path.join(root, "Package.swift")]
    for directory, _, names in os.walk(os.path.join(root, "Sources")):
        files += [os.path.join(directory, name) for name in names if name.endswith((".swift", ".c", ".h"))]
    cache, problems, cited = {}, [], 0
    for path in sorted(files):
        if not os.path.exists(path):
            continue
        for line, text in comment_blocks(path):
            for match in PATH.finditer(text):
                cited += 1
                where = f"{os.path.relpath(path, root)}:{line}"
                doc = match.group(2)
                if match.group(1) or doc == "DESIGN.md":
                    problems.append(f"{where}: cites {match.group(0)}, which is not in the repository")
                    continue
                full = os.path.join(root, doc)
                if not os.path.isfile(full):
                    problems.append(f"{where}: cites {doc}, which does not exist")
                    continue
                if doc not in cache:
                    cache[doc] = headings(full)
                titles, numbers = cache[doc]
                rest = text[match.end():]
                while True:   # titles and numbers, in any order (`§5, "Counters"`)
                    title = TITLE.match(rest)
                    if title:
                        name = title.group(1).strip().rstrip(".")
                        if not any(cites(heading, name) for heading in titles):
                            problems.append(f'{where}: cites {doc}, "{name}", which is no heading of it')
                        rest = rest[title.end():]
                        continue
                    section = SECTION.match(rest)
                    if not section:
                        break
                    first = int(section.group(1))
                    last = int(section.group(2)) if section.group(2) else first
                    for number in range(first, last + 1):
                        if number not in numbers:
                            problems.append(f"{where}: cites {doc} §{number}, which has no section {number}")
                    rest = rest[section.end():]
    # The docs themselves, and the README, cite nothing outside the repository.
    pages = [os.path.join(root, "README.md")]
    for directory, _, names in os.walk(os.path.join(root, "docs")):
        pages += [os.path.join(directory, name) for name in names if name.endswith(".md")]
    for page in sorted(pages):
        if not os.path.exists(page):
            continue
        with open(page, encoding="utf-8") as text:
            for number, line in enumerate(text, 1):
                for match in PATH.finditer(line):
                    if match.group(1) or match.group(2) == "DESIGN.md":
                        problems.append(f"{os.path.relpath(page, root)}:{number}: cites {match.group(0)}, which is not in the repository")
    return problems, cited


def report(problems, cited):
    if problems:
        print(f"check-doc-citations: {len(problems)} of {cited} citations of the docs point nowhere:")
        for problem in problems:
            print("  " + problem)
        sys.exit(1)
    print(f"check-doc-citations: all {cited} citations of the docs in Sources and Package.swift point at a doc and section that exist")


def self_test():
    """The check against a made-up repository: each kind of broken citation is caught, and the
    good ones pass."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs"))
        os.makedirs(os.path.join(root, "Sources", "M"))
        with open(os.path.join(root, "docs", "guide.md"), "w") as doc:
            doc.write("# Guide\n\n## 1. Start\n\n### Counters: slots (2026-12-03)\n\n**Sets.** text\n")
        with open(os.path.join(root, "README.md"), "w") as readme:
            readme.write("See ../shared/DESIGN.md.\n")
        with open(os.path.join(root, "Sources", "M", "a.swift"), "w") as source:
            source.write('/// Good: docs/guide.md, "Counters", "Sets"; docs/guide.md §1; (docs/guide.md,\n'
                         '/// "Counters").\nlet x = 1 // docs/guide.md "Missing title"\n'
                         '/// docs/absent.md, and docs/guide.md §2–3, and DESIGN.md §5.\n')
        problems, cited = check(root)
    wanted = ['"Missing title"', "docs/absent.md", "§2,", "§3,", "DESIGN.md", "../shared/DESIGN.md"]
    found = [any(part in problem for problem in problems) for part in wanted]
    if len(problems) != 6 or not all(found) or cited != 7:
        print(f"check-doc-citations self-test: FAILED: {cited} citations, problems {problems}")
        sys.exit(1)
    print("check-doc-citations self-test: PASSED: a missing title, doc and section, and files outside the repository are caught")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    report(*check(sys.argv[1] if len(sys.argv) > 1 else "."))


if __name__ == "__main__":
    main()
