#!/usr/bin/env python3
"""exports.py BUILD WORK - libsaga.so exports the API and nothing else: installs BUILD into
WORK/prefix, lists the functions the installed headers declare (the compiler's -aux-info of a
file that includes <saga/saga.h>), and compares them with the dynamic symbols the installed
libsaga.so defines (nm -D --defined-only). Fails naming every symbol exported without being
declared (an internal function leaking into the API) and every declared function not exported
(a declaration without SAGA_API: a user's program would not link)."""
import glob
import os
import re
import shutil
import subprocess
import sys

# Symbols the toolchain adds to every shared object, or a sanitizer's instrumentation adds.
TOOLCHAIN = re.compile(r"^(_init|_fini|_edata|_end|__bss_start|__(asan|odr_asan|ubsan|sancov)\w*"
                       r"|___asan\w*)$")


def declared(prefix, work):
    src = os.path.join(work, "api.c")
    aux = os.path.join(work, "api.aux")
    with open(src, "w") as f:
        f.write("#include <saga/saga.h>\n")
    cc = shutil.which("gcc") or "cc"  # -aux-info is GCC's
    subprocess.run([cc, "-std=c11", "-I", os.path.join(prefix, "include"), "-aux-info", aux,
                    "-S", "-o", os.devnull, src], check=True)
    names = {}
    for line in open(aux):
        m = re.match(r"/\* (\S+):(\d+):\w+ \*/ (.*)", line)
        if not m or "/include/saga/" not in m.group(1) or m.group(3).startswith("static "):
            continue
        name = re.search(r"(\w+) \(", m.group(3))
        if name:
            names[name.group(1)] = "%s:%s" % (os.path.basename(m.group(1)), m.group(2))
    return names


def exported(prefix):
    libs = glob.glob(os.path.join(prefix, "lib*", "libsaga.so"))
    if len(libs) != 1:
        sys.exit("FAIL: expected one installed libsaga.so, found %r" % libs)
    out = subprocess.run(["nm", "-D", "--defined-only", libs[0]], capture_output=True, text=True,
                         check=True).stdout
    return {p[-1] for p in (l.split() for l in out.splitlines()) if p and
            not TOOLCHAIN.match(p[-1])}


def main():
    build, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    prefix = os.path.join(work, "prefix")
    subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True,
                   stdout=subprocess.DEVNULL)
    api, syms = declared(prefix, work), exported(prefix)
    leaked = sorted(syms - set(api))
    missing = sorted(set(api) - syms)
    for s in leaked:
        print("FAIL: libsaga.so exports %s, which no installed header declares" % s)
    for s in missing:
        print("FAIL: %s (%s) is declared but not exported: mark it SAGA_API" % (s, api[s]))
    print("%d functions declared by the installed headers, %d symbols exported" %
          (len(api), len(syms)))
    if not api:
        sys.exit("FAIL: found no declarations in the installed headers")
    sys.exit(1 if leaked or missing else 0)


if __name__ == "__main__":
    main()
