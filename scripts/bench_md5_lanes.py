#!/usr/bin/env python3
"""The lanes' MD5 kernel (Sources/CMultiMD5) by how many lanes are busy and where.

    scripts/bench_md5_lanes.py [--runs N] [--mb MB]

Compiles a small C driver against the kernel's source (clang, -O2, in a temporary folder)
and times `pl_md5_lanes_blocks` over MB megabytes a lane, the best of N runs, for 2, 4, 8
and 16 busy lanes: in one half of the register (lanes 0..n-1, the half-width AVX-512
kernel) against the same number split over both halves (the whole register), and at the
AVX2 level. Prints ns a 64-byte block-step and the ratio half / whole.
"""
import argparse
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

DRIVER = r"""
#include "CMultiMD5.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    size_t slot = (size_t)atoi(argv[1]) << 20;
    uint8_t *base = aligned_alloc(4096, 16 * slot);
    memset(base, 7, 16 * slot);
    uint32_t off[16];
    for (int i = 0; i < 16; i++) off[i] = (uint32_t)(i * slot);
    pl_md5_lanes st;
    for (int i = 0; i < 16; i++) pl_md5_lanes_reset(&st, i);
    const char *names[] = { "half", "split", "avx2" };
    for (int kind = 0; kind < 3; kind++)
        for (int lanes = 2; lanes <= 16; lanes *= 2) {
            uint32_t mask = lanes == 16 ? 0xffffu : (1u << lanes) - 1;
            if (kind == 1 && lanes < 16) mask = ((1u << (lanes / 2)) - 1) | (((1u << (lanes / 2)) - 1) << 8);
            int level = kind == 2 ? PL_MD5_AVX2 : PL_MD5_AVX512;
            if (level > pl_md5_lanes_best_level()) continue;
            double t0 = now();
            pl_md5_lanes_blocks(level, &st, base, off, mask, slot / 64);
            printf("%s %d %.1f\n", names[kind], lanes, (now() - t0) / (slot / 64.0) * 1e9);
        }
    return 0;
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--mb", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "driver.c"
        src.write_text(DRIVER)
        exe = pathlib.Path(tmp) / "driver"
        subprocess.run(["clang", "-O2", f"-I{ROOT}/Sources/CMultiMD5/include", str(src),
                        str(ROOT / "Sources/CMultiMD5/multi_md5.c"), "-lcrypto", "-o", str(exe)], check=True)
        best = {}
        for _ in range(args.runs):
            out = subprocess.run([str(exe), str(args.mb)], check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                kind, lanes, ns = line.split()
                key = (kind, int(lanes))
                best[key] = min(best.get(key, float("inf")), float(ns))
    print(f"ns per 64-byte block-step, best of {args.runs} runs, {args.mb} MB a lane:")
    print(f"{'busy lanes':>10} {'one half':>9} {'both halves':>12} {'AVX2':>7} {'ratio half/both':>16}")
    for lanes in (2, 4, 8, 16):
        half, split, avx2 = best.get(("half", lanes)), best.get(("split", lanes)), best.get(("avx2", lanes))
        fmt = lambda v: f"{v:.1f}" if v is not None else "-"
        ratio = f"{half / split:.2f}" if half and split and lanes < 16 else "-"
        print(f"{lanes:>10} {fmt(half):>9} {fmt(split):>12} {fmt(avx2):>7} {ratio:>16}")


if __name__ == "__main__":
    main()
