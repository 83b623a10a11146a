"""Session 27: the few ncu --set full numbers that say what bounds a kernel-alone role2 form (speed of light, L2,
issue, pipes, warps per scheduler), one column per ``full_*.csv.gz`` given: python3 ncu_summary.py FILE..."""
import csv
import gzip
import sys

ROWS = [("GPU Speed Of Light Throughput", "", "Duration"), ("GPU Speed Of Light Throughput", "", "SM Frequency"),
        ("GPU Speed Of Light Throughput", "", "DRAM Throughput"),
        ("GPU Speed Of Light Throughput", "", "L2 Cache Throughput"),
        ("GPU Speed Of Light Throughput", "", "L1/TEX Cache Throughput"),
        ("Memory Workload Analysis", "", "L2 Cache Sectors"),
        ("Compute Workload Analysis", "", "Issue Slots Busy"),
        ("Compute Workload Analysis", "Pipe Utilization (% of active cycles)", "ALU"),
        ("Compute Workload Analysis", "Pipe Utilization (% of active cycles)", "FMA"),
        ("Compute Workload Analysis", "Pipe Utilization (% of active cycles)", "Tensor (All)"),
        ("Scheduler Statistics", "", "Active Warps Per Scheduler"),
        ("Scheduler Statistics", "", "Eligible Warps Per Scheduler"),
        ("Warp State Statistics", "", "Warp Cycles Per Issued Instruction"),
        ("Memory Workload Analysis", "", "Instructions Executed"),
        ("Launch Statistics", "", "Registers Per Thread")]


def load(path):
    d = {}
    for r in csv.reader(gzip.open(path, "rt")):
        if len(r) > 15 and r[0].isdigit():
            d.setdefault((r[11], r[12], r[13]), r[15])
    return d


def main(paths):
    data = [load(p) for p in paths]
    print("| metric | " + " | ".join(p.split("full_")[-1].split(".")[0] for p in paths) + " |")
    print("|---" * (len(paths) + 1) + "|")
    for key in ROWS:
        vals = [next((v for k, v in d.items() if k[0] == key[0] and k[2] == key[2]
                      and (not key[1] or k[1].startswith(key[1].split(" (")[0]))), "") for d in data]
        print(f"| {key[2]} | " + " | ".join(vals) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
