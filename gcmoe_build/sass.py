"""SASS inspection of built cubins, on the build machine (no GPU): what ``ptxas`` made of a kernel.

``nvdisasm`` comes from the ``nvidia-cuda-nvdisasm`` wheel (the build extra). Used for the checks the performance
log quotes: the MMAs are ``QGMMA`` with the A operand in registers (register-A wgmma, paper §4.4), where the spill
traffic (``STL``/``LDL``) sits relative to the MMA loops, and how many instructions a mainloop iteration issues
(the SM90 role2 mainloop is latency-bound: every extra instruction in it costs).

    python -m gcmoe_build.sass BUNDLE [--role role2] [--where bm=8,threads=384,ranks=2]
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

NVDISASM_PACKAGE = "nvidia-cuda-nvdisasm"

_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)(\S*)\s*(.*?)\s*;")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"\bBRA\S*\s+`\((\.L_x_\d+)\)")


class SassError(RuntimeError):
    pass


def locate_nvdisasm() -> Path:
    """The ``nvdisasm`` binary of the installed ``nvidia-cuda-nvdisasm`` wheel (SassError with the fix if absent)."""
    try:
        dist = metadata.distribution(NVDISASM_PACKAGE)
    except metadata.PackageNotFoundError:
        raise SassError(f"{NVDISASM_PACKAGE} is not installed: pip install -e '.[build]' (or pip install "
                        f"{NVDISASM_PACKAGE})") from None
    hits = [f for f in (dist.files or ()) if f.name == "nvdisasm" and f.parent.name == "bin"]
    if len(hits) != 1:
        raise SassError(f"{NVDISASM_PACKAGE}=={dist.version}: expected one bin/nvdisasm, found {hits}")
    return Path(str(dist.locate_file(hits[0]))).resolve()


def disassemble(cubin: bytes, *, encodings: bool = False) -> str:
    """The cubin's SASS as ``nvdisasm -c`` prints it (code sections only); ``encodings``: with ``-hex``, each
    instruction's two 64-bit words as comments (what :func:`control_words` reads)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        r = subprocess.run([str(locate_nvdisasm()), "-c", *(["-hex"] if encodings else []), f.name],
                           capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SassError(f"nvdisasm failed ({r.returncode}): {r.stderr.strip()[:500]}")
    return r.stdout


@dataclass(frozen=True)
class Insn:
    line: int
    opcode: str  # without modifiers, e.g. "QGMMA", "LDL"
    modifiers: str
    operands: str


@dataclass
class Loop:
    """A backward branch's body: instructions from its target label to the branch."""

    start: int
    end: int
    insns: list[Insn] = field(default_factory=list)

    @property
    def histogram(self) -> collections.Counter:
        return collections.Counter(i.opcode for i in self.insns)

    def count(self, *opcodes: str) -> int:
        return sum(1 for i in self.insns if i.opcode in opcodes)


def parse(sass: str) -> tuple[list[Insn], dict[str, int]]:
    """Instructions (with their line number) and label lines of ``nvdisasm -c`` output."""
    insns, labels = [], {}
    for n, text in enumerate(sass.splitlines()):
        m = _LABEL.match(text)
        if m:
            labels[m.group(1)] = n
            continue
        m = _INSN.match(text)
        if m:
            insns.append(Insn(n, m.group(2), m.group(3), m.group(4)))
    return insns, labels


def innermost_mma_loops(sass: str) -> list[Loop]:
    """The mainloop bodies: for every QGMMA, the smallest backward-branch range that holds it; in code order."""
    return _mma_loops(sass.splitlines(), *parse(sass))


def loads_under_mma(loop: Loop, opcode: str = "LDS", modifiers: str = ".128") -> int:
    """How many of ``loop``'s loads (``opcode`` with ``modifiers`` among its modifiers) issue while a QGMMA group is
    pending, i.e. after a QGMMA and before the next ``WARPGROUP.DEPBAR``: their latency runs under the MMAs."""
    pending, n = False, 0
    for i in loop.insns:
        if i.opcode == "QGMMA":
            pending = True
        elif i.opcode == "WARPGROUP" and i.modifiers.startswith(".DEPBAR"):
            pending = False
        elif pending and i.opcode == opcode and modifiers in i.modifiers:
            n += 1
    return n


def innermost_copy_loops(sass: str) -> list[Loop]:
    """The producer's stage loops: for every bulk copy (``UBLKCP``), the smallest backward-branch range that holds
    it (the pipelined role2 kernels issue a K128 weight stage per iteration; spills there delay every stage)."""
    return _mma_loops(sass.splitlines(), *parse(sass), opcode="UBLKCP")


def _backward_spans(lines: list[str], insns: list[Insn], labels: dict[str, int]) -> list[tuple[int, int]]:
    """(target label line, branch line) of every backward branch: the loops, nested ones included."""
    spans = []
    for i in insns:
        if i.opcode == "BRA":
            m = _BRANCH.search(lines[i.line])
            if m and labels.get(m.group(1), i.line + 1) < i.line:
                spans.append((labels[m.group(1)], i.line))
    return spans


def loop_spills(sass: str) -> list[tuple[int, int, int, int]]:
    """Where the spills sit: (start line, end line, STL + LDL, QGMMA) of every loop holding either, outermost first
    (a loop's counts include its inner loops'). Spills in a task loop but outside its chunk loops run once per task."""
    lines = sass.splitlines()
    insns, labels = parse(sass)
    out = []
    for a, e in sorted(set(_backward_spans(lines, insns, labels)), key=lambda sp: (sp[0], -sp[1])):
        body = [i for i in insns if a <= i.line <= e]
        sp, q = sum(1 for i in body if i.opcode in ("STL", "LDL")), sum(1 for i in body if i.opcode == "QGMMA")
        if sp or q:
            out.append((a, e, sp, q))
    return out


def _mma_loops(lines: list[str], insns: list[Insn], labels: dict[str, int], opcode: str = "QGMMA") -> list[Loop]:
    spans = _backward_spans(lines, insns, labels)
    chosen = set()
    for q in (i for i in insns if i.opcode == opcode):
        holding = [sp for sp in spans if sp[0] <= q.line <= sp[1]]
        if holding:
            chosen.add(min(holding, key=lambda sp: sp[1] - sp[0]))
    return [Loop(a, e, [x for x in insns if a <= x.line <= e]) for a, e in sorted(chosen)]


def _dest_regs(modifiers: str) -> int:
    """Registers a load with these modifiers writes: 4 for ``.128``, 2 for ``.64``, else 1."""
    return 4 if ".128" in modifiers else 2 if ".64" in modifiers else 1


def load_rounds(sass: str, opcode: str = "LDG", modifiers: str | tuple[str, ...] = ".E.128") -> list[int]:
    """How many latency rounds a straight run of independent loads costs: for each ``opcode`` + ``modifiers`` load
    from the first to the last in code order, the round it issues in. A round ends at the first other instruction
    that names a register a load of the round writes (the warp waits there for that load before it issues the
    next one). ``[1, 1, ...]``: every load in flight at once; ptxas may interleave a sum between loads and make it 2-3
    rounds (role3's combine, session 43). ``modifiers`` may name several load kinds (a run of different widths:
    role3's expert-index load among its 16-byte slot loads, session 44)."""
    kinds = (modifiers,) if isinstance(modifiers, str) else tuple(modifiers)
    insns, _ = parse(sass)
    at = [k for k, i in enumerate(insns) if i.opcode == opcode and i.modifiers in kinds]
    if not at:
        return []
    loads = {k: _dest_regs(insns[k].modifiers) for k in at}
    rounds, current, pending = [], 1, set()
    for k in range(at[0], at[-1] + 1):
        regs = [int(r) for r in re.findall(r"\bR(\d+)\b", insns[k].operands)]
        if k in loads:
            rounds.append(current)
            pending |= {regs[0] + j for j in range(loads[k])}
        elif pending & set(regs):  # read (or overwritten: the same scoreboard wait)
            current, pending = current + 1, set()
    return rounds


@dataclass(frozen=True)
class Control:
    """The scheduling word ptxas puts in an instruction's top 23 bits (Volta and later, sm_90 included): stall cycles,
    the scoreboard its result sets when it completes (``write``) and the one its source registers free when read
    (``read``), 0-5 or None, and the scoreboards it waits for before it issues (``wait``)."""

    addr: int
    text: str  # the instruction as nvdisasm prints it, without the encoding comments
    stall: int
    write: int | None
    read: int | None
    wait: frozenset[int]


_HEX_INSN = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?;)\s*/\* 0x[0-9a-f]{16} \*/")
_HEX_HIGH = re.compile(r"^\s*/\* 0x([0-9a-f]{16}) \*/")


def control_words(sass_hex: str) -> list[Control]:
    """Every instruction of ``disassemble(cubin, encodings=True)`` output with its decoded scheduling word."""
    out, lines = [], sass_hex.splitlines()
    for n, text in enumerate(lines[:-1]):
        m, hi = _HEX_INSN.match(text), _HEX_HIGH.match(lines[n + 1])
        if not (m and hi):
            continue
        c = int(hi.group(1), 16) >> 41
        wr, rd = (c >> 5) & 7, (c >> 8) & 7
        out.append(Control(int(m.group(1), 16), m.group(2), c & 0xF, None if wr == 7 else wr, None if rd == 7 else rd,
                           frozenset(b for b in range(6) if (c >> 11) >> b & 1)))
    return out


def first_wait(ctl: list[Control], k: int) -> int | None:
    """Index (into ``ctl``) of the first instruction after ``ctl[k]`` in code order that waits for ``ctl[k]``'s write
    scoreboard, i.e. where its result is first needed on the straight-line path; None if nothing waits for it."""
    b = ctl[k].write
    if b is None:
        raise ValueError(f"{ctl[k].text!r} sets no write scoreboard")
    return next((j for j in range(k + 1, len(ctl)) if b in ctl[j].wait), None)


@dataclass(frozen=True)
class LoopSchedule:
    """An innermost MMA loop's static schedule, on the path an iteration takes when every mbarrier wait succeeds at
    its first probe (:func:`mbar_slow_paths` left out: the retries, the timeout check and the trap record, ~30
    instructions per wait pair that only a late stage runs): its instructions and QGMMAs, the sum of their stall
    fields (the cycles one warp needs to issue an iteration when no scoreboard wait holds it: a lower bound of its
    latency chain, against which a measured iteration shows how long the warp waited for memory or MMAs), how many of
    them wait for a scoreboard, and the slow-path instructions left out."""

    instructions: int
    qgmma: int
    stall_cycles: int
    waits: int
    slow_path: int = 0


#: MXFP4 weight bytes one register-A QGMMA of role2 consumes: 64 rows x K32 of E2M1 codes (1 024 B) and their UE8M0
#: scales (one byte per row and K32)
ROLE2_BYTES_PER_QGMMA = 64 * 32 // 2 + 64


def issue_bound(schedule: LoopSchedule, clock_ghz: float = 1.75, sms: int = 132, read_tbs: float = 4.4) -> float:
    """The weight stream a role2 K loop could sustain if issue were its only limit, as a fraction of ``read_tbs``. A
    scheduler issues one instruction per cycle; each consumer warp on it (one per warpgroup and CTA) issues the
    loop's ``instructions`` per iteration, in which its warpgroup streams ``qgmma`` x :data:`ROLE2_BYTES_PER_QGMMA`
    bytes (34.8 KB per CTA for a K256 iteration of both warpgroups), so an SM streams ``qgmma x bytes / instructions``
    per cycle whatever the number of warps per scheduler. Session 53 corrected a factor 2 that sessions 49-51 had
    (one warpgroup's bytes for both warpgroups' iteration)."""
    return schedule.qgmma * ROLE2_BYTES_PER_QGMMA / schedule.instructions * clock_ghz * 1e9 * sms / (read_tbs * 1e12)


def mbar_slow_paths(insns: list[Insn], lines: list[str], labels: dict[str, int]) -> set[int]:
    """Lines of the mbarrier waits' slow paths: after a ``SYNCS.PHASECHK`` probe whose next instruction branches
    forward on success (``@P BRA L``), everything up to label ``L`` (``ring_sync.mbar_wait_rt``'s retries, timeout
    check and trap record)."""
    cold = set()
    for k in range(len(insns) - 1):
        a, b = insns[k], insns[k + 1]
        m = _BRANCH.search(lines[b.line]) if a.opcode == "SYNCS" and "PHASECHK" in a.modifiers else None
        if m and b.opcode == "BRA" and "@" in lines[b.line] and labels.get(m.group(1), -1) > b.line:
            cold.update(range(b.line + 1, labels[m.group(1)]))
    return cold


def mma_loop_schedules(sass_hex: str) -> list[LoopSchedule]:
    """:class:`LoopSchedule` of every innermost MMA loop (as :func:`innermost_mma_loops`) of
    ``disassemble(cubin, encodings=True)`` output, in code order."""
    lines = sass_hex.splitlines()
    by_addr = {c.addr: c for c in control_words(sass_hex)}
    insns, labels = parse(sass_hex)
    cold = mbar_slow_paths(insns, lines, labels)
    out = []
    for lp in _mma_loops(lines, insns, labels):
        hot = [i for i in lp.insns if i.line not in cold]
        ctl = [by_addr[int(_INSN.match(lines[i.line]).group(1), 16)] for i in hot]
        out.append(LoopSchedule(len(ctl), sum(1 for i in hot if i.opcode == "QGMMA"), sum(c.stall for c in ctl),
                                sum(1 for c in ctl if c.wait), len(lp.insns) - len(hot)))
    return out


def qgmma_register_a(sass: str) -> tuple[int, int]:
    """(QGMMA count, how many take A from registers): register-A form ``QGMMA... R<d>, R<a>, gdesc[...]``."""
    return _qgmma_register_a(parse(sass)[0])


def _qgmma_register_a(insns: list[Insn]) -> tuple[int, int]:
    q = [i for i in insns if i.opcode == "QGMMA"]
    return len(q), sum(1 for i in q if re.match(r"R\d+, R\d+, gdesc\[", i.operands))


@dataclass(frozen=True)
class SassSummary:
    qgmma: int
    qgmma_register_a: int
    spill_ops: int  # STL + LDL anywhere
    spill_ops_in_mma_loops: int
    mma_loops: tuple[tuple[int, int], ...]  # (instructions, QGMMA) per innermost MMA loop
    spill_ops_in_copy_loops: int = 0  # STL + LDL inside the producer's bulk-copy (stage) loops
    #: R2UR per innermost MMA loop: a loop on the uniform datapath builds its wgmma descriptors, stage indices and
    #: parities in uniform registers; one ptxas thinks divergent builds them per thread and moves each to a uniform
    #: register before its QGMMA (32 per K256 in the one-CTA role2 loops, sessions 35-36)
    r2ur_in_mma_loops: tuple[int, ...] = ()

    @property
    def insns_per_qgmma(self) -> tuple[float, ...]:
        return tuple(n / q for n, q in self.mma_loops)


def summarize(cubin: bytes) -> SassSummary:
    sass = disassemble(cubin)
    insns, labels = parse(sass)
    loops = _mma_loops(sass.splitlines(), insns, labels)
    copies = _mma_loops(sass.splitlines(), insns, labels, opcode="UBLKCP")
    q, ra = _qgmma_register_a(insns)
    return SassSummary(
        qgmma=q, qgmma_register_a=ra, spill_ops=sum(1 for i in insns if i.opcode in ("STL", "LDL")),
        spill_ops_in_mma_loops=sum(lp.count("STL", "LDL") for lp in loops),
        mma_loops=tuple((len(lp.insns), lp.count("QGMMA")) for lp in loops),
        spill_ops_in_copy_loops=sum(lp.count("STL", "LDL") for lp in copies),
        r2ur_in_mma_loops=tuple(lp.count("R2UR") for lp in loops))


def setmaxnreg_regions(sass: str) -> list[tuple[int, int]]:
    """``(cap, highest register named)`` of the code laid out after each ``USETMAXREG`` (a warp-specialised kernel's
    ``setmaxnreg``), up to the next one or the end, in layout order: ptxas keeps each warp role's code under the
    registers its ``setmaxnreg`` leaves it, so ``highest < cap`` wherever the layout follows the roles."""
    lines = sass.splitlines()
    marks = [(k, int(m.group(1), 16)) for k, line in enumerate(lines)
             for m in [re.search(r"USETMAXREG\.\S+ (?:UP\d+, )?(0x[0-9a-f]+)", line)] if m]
    out = []
    for (k, cap), (k_next, _) in zip(marks, marks[1:] + [(len(lines), 0)]):
        regs = [int(r) for line in lines[k:k_next] for r in re.findall(r"\bR(\d+)\b", line)]
        out.append((cap, max(regs, default=-1)))
    return out


def _matches(variant: dict, where: dict[str, str]) -> bool:
    return all(str(variant.get(k)) == v for k, v in where.items())


def _label(variant: dict) -> str:
    """A role2 / role4 record's distinguishing parameters, for the CLI's tables."""
    return " ".join(f"{k}={variant[k]}" for k in ("hidden", "ranks", "bm", "threads", "ctas_per_sm", "w1_split")
                    if k in variant)


def schedule_ab(bundle_a, bundle_b, role: str = "role2", where: dict[str, str] | None = None,
                ignore: tuple[str, ...] = ("k_interleave",)) -> list[tuple[dict, list, list]]:
    """Each record of ``bundle_a`` (``role``, ``where``) beside the record of ``bundle_b`` whose variant parameters
    are the same but for ``ignore`` (a build option the two bundles differ in, e.g. the K order): ``(variant, A's
    mma_loop_schedules, B's)``; a record without a partner is left out. Two opened bundles
    (``gcmoe_runtime.artifacts.bundle.open_bundle``)."""
    def ident(v):
        return tuple(sorted((k, str(x)) for k, x in v.items() if k not in ignore))

    others = {ident(r.variant): r for r in bundle_b.records if r.role == role}
    rows = []
    for r in sorted(bundle_a.records, key=lambda r: sorted(r.variant.items())):
        o = others.get(ident(r.variant))
        if r.role != role or not _matches(r.variant, where or {}) or o is None:
            continue
        rows.append((dict(r.variant), mma_loop_schedules(disassemble(bundle_a.cubin(r.key), encodings=True)),
                     mma_loop_schedules(disassemble(bundle_b.cubin(o.key), encodings=True))))
    return rows


def main(argv: list[str] | None = None) -> int:
    from gcmoe_runtime.artifacts.bundle import open_bundle

    ap = argparse.ArgumentParser(prog="python -m gcmoe_build.sass", description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle")
    ap.add_argument("--role", default="role2")
    ap.add_argument("--where", default="", help="comma-separated variant filters, e.g. bm=8,threads=384,ranks=2")
    ap.add_argument("--loops", action="store_true", help="also list every loop holding spills or QGMMAs (loop_spills)")
    ap.add_argument("--stalls", action="store_true",
                    help="also give each MMA loop's stall cycles and scoreboard waits (mma_loop_schedules)")
    ap.add_argument("--against", metavar="OTHER",
                    help="instead: each K loop's first-probe instructions / stall cycles beside those of OTHER's record "
                         "with the same parameters but for --ignore (schedule_ab)")
    ap.add_argument("--ignore", default="k_interleave", help="comma-separated parameters --against may differ in")
    a = ap.parse_args(argv)
    where = dict(kv.split("=", 1) for kv in a.where.split(",") if kv)
    b = open_bundle(a.bundle)
    if a.against:
        print("| variant | K loops: first-probe instructions / stall cycles, this bundle -> OTHER (instructions) |")
        print("|---|---|")
        for v, mine, other in schedule_ab(b, open_bundle(a.against), a.role, where, tuple(a.ignore.split(","))):
            cells = "; ".join(f"{x.instructions} / {x.stall_cycles} -> {y.instructions} / {y.stall_cycles} "
                              f"({y.instructions - x.instructions:+d})" for x, y in zip(mine, other))
            print(f"| {_label(v)} | {cells} |")
        return 0
    print("| variant | QGMMA (register A) | STL+LDL (in MMA loops) (in stage loops) "
          "| MMA loops: instructions / QGMMA / R2UR |")
    print("|---|---|---|---|")
    for r in sorted(b.records, key=lambda r: sorted(r.variant.items())):
        if r.role != a.role or not _matches(r.variant, where):
            continue
        s = summarize(b.cubin(r.key))
        label = _label(r.variant)
        loops = ", ".join(f"{n}/{q}/{u}" for (n, q), u in zip(s.mma_loops, s.r2ur_in_mma_loops))
        print(f"| {label} | {s.qgmma} ({s.qgmma_register_a}) | {s.spill_ops} ({s.spill_ops_in_mma_loops}) "
              f"({s.spill_ops_in_copy_loops}) | {loops} |")
        if a.stalls:
            for ls in mma_loop_schedules(disassemble(b.cubin(r.key), encodings=True)):
                bound = (f"; issue bound {issue_bound(ls):.0%} of 4.4 TB/s (1.75 GHz, 132 SMs)"
                         if a.role == "role2" else "")
                print(f"|   MMA loop, first-probe path: {ls.instructions} instructions ({ls.slow_path} more on the "
                      f"waits' slow paths), {ls.qgmma} QGMMA{bound} | {ls.stall_cycles} stall cycles | {ls.waits} "
                      "scoreboard waits | |")
        if a.loops:
            for start, end, sp, q in loop_spills(disassemble(b.cubin(r.key))):
                print(f"|   loop lines {start}-{end} | {q} QGMMA | {sp} STL+LDL | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
