#!/usr/bin/env python3
"""Write a deterministic multi-language source tree of N files (default 10,000) into DIR.

Go (60 %), Python (20 %), TypeScript (10 %), C (5 %) and Java (5 %) files of 40-160 lines each,
in 2-level packages; every file defines a type and a few functions and calls functions of a few
others, so the map's graph has edges. A vendor/ tree (5 % more files) is there to be skipped.
"""
import os
import random
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
rnd = random.Random(28)
langs = [("go", 60), ("py", 20), ("ts", 10), ("c", 5), ("java", 5)]
plan = []
for ext, share in langs:
    plan += [ext] * (n * share // 100)
plan += ["go"] * (n - len(plan))
rnd.shuffle(plan)
names = [f"f{i:05d}" for i in range(len(plan))]


def funcs(i):
    return [f"{names[i]}_op{k}" for k in range(4)]


def write(path, text):
    p = os.path.join(out, path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)


for i, ext in enumerate(plan):
    pkg = f"pkg{i % 40:02d}/sub{i % 7}"
    calls = [rnd.randrange(len(plan)) for _ in range(3)]
    called = [funcs(c)[rnd.randrange(4)] for c in calls]
    body_lines = rnd.randrange(8, 30)
    t = f"T{names[i]}"
    if ext == "go":
        fs = "\n".join(
            f"// {f} does step {k}.\nfunc {f.title()}(a int, b string) (int, error) {{\n"
            + "".join(f"\tx{j} := a + {j} // {called[j % 3]}\n" for j in range(body_lines))
            + f"\treturn x0, nil\n}}\n" for k, f in enumerate(funcs(i)))
        text = (f"package sub{i % 7}\n\n// {t} is a record.\ntype {t} struct {{\n\tID int\n\tName string\n}}\n\n"
                f"func (t *{t}) Describe() string {{ return t.Name }}\n\n{fs}")
    elif ext == "py":
        fs = "\n\n".join(
            f"def {f}(a, b=None):\n" + "".join(f"    x{j} = {called[j % 3]}(a)\n" for j in range(body_lines)) + "    return a\n"
            for f in funcs(i))
        text = f"class {t}:\n    def describe(self):\n        return self.name\n\n\n{fs}\n"
    elif ext == "ts":
        fs = "\n".join(
            f"export function {f}(a: number, b?: string): number {{\n" + "".join(f"  const x{j} = {called[j % 3]}(a);\n" for j in range(body_lines)) + "  return a;\n}\n"
            for f in funcs(i))
        text = f"export class {t} {{\n  describe(): string {{ return ''; }}\n}}\n\n{fs}"
    elif ext == "c":
        fs = "\n".join(
            f"int {f}(int a, const char *b) {{\n" + "".join(f"    int x{j} = {called[j % 3]}(a, b);\n" for j in range(body_lines)) + "    return a;\n}\n"
            for f in funcs(i))
        text = f"#include <stdio.h>\n\nstruct {t} {{ int id; }};\n\n{fs}"
    else:
        fs = "\n".join(
            f"    public static int {f}(int a, String b) {{\n" + "".join(f"        int x{j} = {called[j % 3]}(a, b);\n" for j in range(body_lines)) + "        return a;\n    }\n"
            for f in funcs(i))
        text = f"package {pkg.replace('/', '.')};\n\npublic class {t} {{\n{fs}}}\n"
    write(f"{pkg}/{names[i]}.{ext}", text)
for i in range(n // 20):
    write(f"vendor/dep{i % 10}/v{i:04d}.go", f"package dep{i % 10}\n\nfunc Vendored{i}() {{}}\n")
write("README.md", "# generated\n")
