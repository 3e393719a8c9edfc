#!/usr/bin/env python3
"""How much CPU castd's transcoder spends on a 1080p30 -> 720p/480p/360p ladder, all on the CPU and with the
GPU decoding and scaling (NVDEC + scale_cuda + hwdownload, libx264 encoding), and how many such ladders run
at real time at once each way; the ffmpeg CLI doing the same ladder the same two ways beside it.

Each ladder is one `castd worker` (the process castd runs per live stream) reading the whole input file from
stdin as fast as it can; N of them run at once. With --ffmpeg-static, a second ffmpeg (imageio-ffmpeg's static
FFmpeg 9 with NVDEC and scale_cuda) runs the same ladders: it tells how much of castd's figures is Debian's
libav 5.1. CPU-seconds are the processes' own (wait4 rusage); "real-time
ladders" is N x input seconds / the slowest one's wall time: the ladders this box keeps at real time (the
method of ANCHORS.md's GPU figures). Standard library only (it runs on a bare GPU machine).

Where the CPU goes: each castd batch's threads are sampled from /proc (main thread, encode-N stages, the
driver's threads), and "x264 alone" encodes each rung's pictures, decoded and scaled beforehand into raw NV12
files, with castd's x264 options: what the ladder costs when decoding and scaling are free. 1 - x264 alone /
castd all-CPU is the most any GPU without an encoder can save; castd GPU - x264 alone is what castd's GPU path
costs beyond the encodes.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

LADDER = [  # name, width, height, kbps (castd: Owncast's bitrate - 192 for the encoder)
    ("720p", 1280, 720, 2500),
    ("480p", 854, 480, 1200),
    ("360p", 640, 360, 800),
]
FPS = 30
CPU_LEVEL = 2  # x264 veryfast (Owncast's cpuUsageLevel 2)
CHILD_ENV = dict(os.environ)  # castd's and ffmpeg's environment (--ld-path: their libraries)


def worker_config(hls_dir, gpu, device):
    variants = [
        {
            "name": name,
            "videoPassthrough": False,
            "audioPassthrough": False,
            "videoBitrate": kbps,
            "audioBitrate": 0,
            "scaledWidth": w,
            "scaledHeight": h,
            "framerate": FPS,
            "cpuUsageLevel": CPU_LEVEL,
        }
        for name, w, h, kbps in LADDER
    ]
    encoder = {"name": "libx264", "kind": "software", "available": True, "device": "", "reason": ""}
    if gpu:
        encoder = dict(encoder, device=device, decode="cuda")
    return {
        "hlsDir": hls_dir,
        "container": "flv",
        "segmentSeconds": 2,
        "listSize": 10,
        "variants": variants,
        "encoder": "libx264",
        "encoders": [encoder] * len(variants),
        "append": False,
        "segmentId": "bench",
        "lowLatency": False,
    }


def ffmpeg_args(ffmpeg, path, gpu):
    if gpu:
        pre = ["-hwaccel", "cuda", "-hwaccel_output_format", "cuda"]
        scale = lambda w, h: f"scale_cuda={w}:{h},hwdownload,format=nv12"
    else:
        pre = []
        scale = lambda w, h: f"scale={w}:{h}:flags=bilinear"
    n = len(LADDER)
    graph = f"[0:v]split={n}" + "".join(f"[s{i}]" for i in range(n))
    for i, (_, w, h, _) in enumerate(LADDER):
        graph += f";[s{i}]{scale(w, h)}[o{i}]"
    args = [ffmpeg, "-hide_banner", "-nostats", "-loglevel", "error", *pre, "-i", path, "-filter_complex", graph]
    for i, (_, _, _, kbps) in enumerate(LADDER):
        b = kbps - 192
        args += ["-map", f"[o{i}]", "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency", "-threads", "1",
                 "-b:v", f"{b}k", "-maxrate", f"{b * 108 // 100}k", "-bufsize", f"{b * 108 // 100}k",
                 "-g", str(FPS * 2), "-keyint_min", str(FPS * 2), "-sc_threshold", "0", "-f", "null", "-"]
    return args


TICK = os.sysconf("SC_CLK_TCK")


def thread_kind(pid, tid, comm):
    """How a worker's thread is counted: the main thread (demux, decode or its hardware calls, the filter
    graph and downloads, muxing), an encoding stage (`encode-N`: scaling and x264), or another thread by name
    (the CUDA driver's, libavcodec's)."""
    if tid == pid:
        return "main"
    if comm.startswith("encode-"):
        return comm
    return f"other:{comm}"


class ThreadSampler:
    """Polls /proc/<pid>/task/*/stat of the batch's processes: CPU-s per thread kind, summed over processes
    (each thread's last reading before its process exits; the remainder to the wait4 total is `unsampled`)."""

    def __init__(self, pids):
        self.pids = list(pids)
        self.seen = {}  # (pid, tid) -> (kind, ticks)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            for pid in self.pids:
                try:
                    tids = os.listdir(f"/proc/{pid}/task")
                except OSError:
                    continue
                for t in tids:
                    try:
                        raw = open(f"/proc/{pid}/task/{t}/stat").read()
                    except OSError:
                        continue
                    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
                    fields = raw[raw.rindex(")") + 2 :].split()
                    ticks = int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15)
                    self.seen[(pid, int(t))] = (thread_kind(pid, int(t), comm), ticks)
            self.stop.wait(0.1)

    def finish(self):
        self.stop.set()
        self.thread.join()
        by = {}
        for kind, ticks in self.seen.values():
            by[kind] = by.get(kind, 0.0) + ticks / TICK
        return by


def run_batch(make_cmd, n, input_path, tmp, sample_threads=False):
    """Start n processes at once, each reading input_path on stdin (or what make_cmd says); wait for all."""
    procs = []
    t0 = time.monotonic()
    for i in range(n):
        made = make_cmd(i)
        cmd, label = made[0], made[1]
        path = made[2] if len(made) > 2 else input_path
        out = open(os.path.join(tmp, f"{label}-{i}.out"), "wb")
        err = open(os.path.join(tmp, f"{label}-{i}.err"), "wb")
        stdin = open(path, "rb") if path else subprocess.DEVNULL
        p = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=err, env=CHILD_ENV)
        procs.append((p, out, err, stdin, label, i))
    sampler = ThreadSampler(p.pid for p, *_ in procs) if sample_threads else None
    walls, cpu, failed = {}, 0.0, []
    pending = {p.pid: (p, out, err, stdin, label, i) for p, out, err, stdin, label, i in procs}
    while pending:
        pid, status, ru = os.wait4(-1, 0)
        if pid not in pending:
            continue
        p, out, err, stdin, label, i = pending.pop(pid)
        p.returncode = os.waitstatus_to_exitcode(status)
        walls[i] = time.monotonic() - t0
        cpu += ru.ru_utime + ru.ru_stime
        for f in (out, err, stdin):
            if f is not subprocess.DEVNULL:
                f.close()
        if p.returncode != 0:
            tail = open(os.path.join(tmp, f"{label}-{i}.err"), "rb").read()[-600:].decode(errors="replace")
            outs = open(os.path.join(tmp, f"{label}-{i}.out"), "rb").read()[-600:].decode(errors="replace")
            failed.append(f"{label} #{i} exit {p.returncode}: {tail.strip()} {outs.strip()}")
    threads = sampler.finish() if sampler else {}
    if threads:
        threads["unsampled"] = max(0.0, cpu - sum(threads.values()))
    return {"n": n, "cpu": cpu, "wall_max": max(walls.values()), "wall_mean": sum(walls.values()) / n,
            "failed": failed, "threads": threads}


def thread_line(r, ladder_seconds):
    """The batch's CPU by thread kind, per ladder-second, largest first."""
    items = sorted(r.get("threads", {}).items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v / ladder_seconds:.3f}" for k, v in items if v / ladder_seconds >= 0.0005) or "-"


def x264_alone_args(ffmpeg, rung, raw):
    """Debian's ffmpeg CLI encoding one rung's pictures (raw NV12, made beforehand) with castd's own x264
    options (`hwaccel::recipe`): the ladder's cost if decoding and scaling were free."""
    name, w, h, kbps = rung
    b = kbps - 192
    return [ffmpeg, "-hide_banner", "-nostats", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "nv12",
            "-s", f"{w}x{h}", "-r", str(FPS), "-i", raw, "-c:v", "libx264", "-preset", "veryfast",
            "-tune", "zerolatency", "-profile:v", "high", "-x264-params", "scenecut=0:open_gop=0", "-forced-idr", "1",
            "-threads", "1", "-b:v", f"{b}k", "-maxrate", f"{b * 108 // 100}k", "-bufsize", f"{b * 108 // 100}k",
            "-g", str(FPS * 2), "-keyint_min", str(FPS * 2), "-sc_threshold", "0", "-f", "null", "-"]


def make_raw_rungs(ffmpeg, input_path, tmp):
    """Each rung's pictures as raw NV12 files (decoded and scaled once, not counted)."""
    paths = []
    for name, w, h, _ in LADDER:
        path = os.path.join(tmp, f"raw-{name}.nv12")
        subprocess.run([ffmpeg, "-hide_banner", "-loglevel", "error", "-i", input_path, "-vf",
                        f"scale={w}:{h}:flags=bilinear", "-pix_fmt", "nv12", "-f", "rawvideo", "-y", path],
                       check=True, env=CHILD_ENV)
        paths.append(path)
    return paths


def started_encoders(tmp, label):
    """The encoders and the hardware ladder the first worker of a batch reported."""
    try:
        lines = open(os.path.join(tmp, f"{label}-0.out")).read().splitlines()
        err = open(os.path.join(tmp, f"{label}-0.err")).read()
    except OSError:
        return "?"
    encs = next((json.loads(l).get("encoders") for l in lines if '"started"' in l), None)
    graph = "gpu graph" if "hardware ladder" in err else "cpu"
    # The capacity policy must not have changed the presets (that would make the figures incomparable).
    changes = sum(1 for l in lines if '"ladderChanged"' in l)
    return f"{encs} ({graph}, preset changes: {changes})"


def check_alignment(castd, ffprobe, input_path, gpu, device):
    """One ladder into HLS, then ffprobe: every segment of every rung starts with a keyframe at the same time
    as the other rungs' segments (the ladder's promise: players switch rungs at any segment boundary)."""
    tmp = tempfile.mkdtemp(prefix="castd-gpu-check-")
    try:
        cfg = json.dumps(worker_config(tmp, gpu, device))
        with open(input_path, "rb") as stdin:
            r = subprocess.run([castd, "worker", "--config", cfg], stdin=stdin, capture_output=True, env=CHILD_ENV)
        if r.returncode != 0:
            return [f"the worker failed: {r.stderr.decode(errors='replace')[-400:]}"]
        starts, problems = [], []
        for n in range(len(LADDER)):
            d = os.path.join(tmp, str(n))
            segs = sorted((f for f in os.listdir(d) if f.endswith(".ts")), key=lambda f: os.path.getmtime(os.path.join(d, f)))
            first = []
            for seg in segs:
                out = subprocess.run([ffprobe, "-v", "error", "-select_streams", "v:0", "-show_entries",
                                      "packet=pts_time,flags", "-of", "csv=p=0", os.path.join(d, seg)],
                                     capture_output=True, text=True, env=CHILD_ENV).stdout.split()
                if not out:
                    problems.append(f"rung {n} {seg}: no video")
                    continue
                pts, flags = out[0].split(",")[:2]
                if "K" not in flags:
                    problems.append(f"rung {n} {seg}: does not start with a keyframe")
                first.append(round(float(pts), 3))
            starts.append(first)
        if len({len(s) for s in starts}) != 1:
            problems.append(f"segment counts differ: {[len(s) for s in starts]}")
        for i, times in enumerate(zip(*starts)):
            if max(times) - min(times) > 0.001:
                problems.append(f"segment {i} starts at {times}")
        print(f"# alignment ({'gpu' if gpu else 'cpu'}): {len(starts[0])} segments per rung, "
              f"starts {starts[0][:6]}..., {len(problems)} problem(s)", flush=True)
        return problems
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--castd", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--seconds", type=float, required=True, help="the input's duration")
    ap.add_argument("--counts", default="1,8,16")
    ap.add_argument("--ffmpeg", default="")
    ap.add_argument("--ffmpeg-counts", default="8")
    ap.add_argument("--ffmpeg-static", default="", help="a second ffmpeg (e.g. imageio-ffmpeg's static FFmpeg 9)")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--modes", default="cpu,gpu")
    ap.add_argument("--json-out", default="")
    ap.add_argument("--ld-path", default="", help="LD_LIBRARY_PATH for castd and ffmpeg only")
    ap.add_argument("--x264-alone", type=int, default=1, help="1: also time x264 alone on each count (needs --ffmpeg)")
    ap.add_argument("--check-alignment", default="", help="an ffprobe: only check keyframe alignment, each mode")
    a = ap.parse_args()
    if a.ld_path:
        CHILD_ENV["LD_LIBRARY_PATH"] = a.ld_path
    if a.check_alignment:
        problems = []
        for mode in a.modes.split(","):
            problems += check_alignment(a.castd, a.check_alignment, a.input, mode == "gpu", a.device)
        for p in problems:
            print(f"#   {p}")
        return 1 if problems else 0
    modes = a.modes.split(",")
    results = []
    tmp = tempfile.mkdtemp(prefix="castd-gpu-bench-")
    try:
        for n in [int(x) for x in a.counts.split(",") if x and int(x) > 0]:
            for mode in modes:
                label = f"castd-{mode}-{n}"

                def make(i, mode=mode, label=label):
                    d = os.path.join(tmp, f"hls-{label}-{i}")
                    os.makedirs(d, exist_ok=True)
                    cfg = json.dumps(worker_config(d, mode == "gpu", a.device))
                    return [a.castd, "--log-level", "info", "worker", "--config", cfg], label

                r = run_batch(make, n, a.input, tmp, sample_threads=True)
                r.update(tool="castd", mode=mode, encoders=started_encoders(tmp, label))
                results.append(r)
                print(f"# {label}: cpu {r['cpu']:.1f} s, wall {r['wall_max']:.1f} s, {r['encoders']}", flush=True)
                print(f"#   threads (CPU-s per ladder-second): {thread_line(r, n * a.seconds)}", flush=True)
                for f in r["failed"][:3]:
                    print(f"#   FAILED {f}", flush=True)
                for i in range(n):
                    shutil.rmtree(os.path.join(tmp, f"hls-{label}-{i}"), ignore_errors=True)
        if a.ffmpeg and a.x264_alone:
            raws = make_raw_rungs(a.ffmpeg, a.input, tmp)
            for n in [int(x) for x in a.counts.split(",") if x and int(x) > 0]:
                label = f"x264-alone-{n}"
                k = len(LADDER)
                r = run_batch(lambda i, label=label: (x264_alone_args(a.ffmpeg, LADDER[i % k], raws[i % k]), label, ""),
                              n * k, "", tmp)
                r.update(tool="x264 alone", mode="cpu", encoders="", n=n)
                results.append(r)
                print(f"# {label}: cpu {r['cpu']:.1f} s, wall {r['wall_max']:.1f} s", flush=True)
                for f in r["failed"][:3]:
                    print(f"#   FAILED {f}", flush=True)
            for raw in raws:
                os.unlink(raw)
        clis = [(tool, path) for tool, path in (("ffmpeg CLI", a.ffmpeg), ("ffmpeg static", a.ffmpeg_static)) if path]
        for tool, path in clis:
            for n in [int(x) for x in a.ffmpeg_counts.split(",") if x and int(x) > 0]:
                for mode in modes:
                    label = f"{tool.replace(' ', '-')}-{mode}-{n}"
                    r = run_batch(lambda i, mode=mode, label=label, path=path: (ffmpeg_args(path, "pipe:0", mode == "gpu"), label),
                                  n, a.input, tmp)
                    r.update(tool=tool, mode=mode, encoders="")
                    results.append(r)
                    print(f"# {label}: cpu {r['cpu']:.1f} s, wall {r['wall_max']:.1f} s", flush=True)
                    for f in r["failed"][:3]:
                        print(f"#   FAILED {f}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(f"{a.seconds:.0f} s of 1080p{FPS} -> " + " + ".join(n for n, *_ in LADDER) + " (x264 veryfast, one thread per rung)")
    print(f"{'':<12} {'ladders':>7} | {'all CPU: CPU-s':>14} {'wall':>6} {'RT ladders':>10} | "
          f"{'GPU decode+scale: CPU-s':>23} {'wall':>6} {'RT ladders':>10} | {'CPU-s':>7} {'RT ladders':>10}")
    by = {(r["tool"], r["mode"], r["n"]): r for r in results}
    pairs = {(r["tool"], r["n"]) for r in results if r["tool"] != "x264 alone"}
    for tool, n in sorted(pairs, key=lambda k: (k[0] != "castd", k[0], k[1])):
        c, g = by.get((tool, "cpu", n)), by.get((tool, "gpu", n))
        if not c or not g or c["failed"] or g["failed"]:
            print(f"{tool:<12} {n:>7} | failed: see the lines above")
            continue
        rt = lambda r: n * a.seconds / r["wall_max"]
        print(f"{tool:<12} {n:>7} | {c['cpu']:>14.1f} {c['wall_max']:>6.1f} {rt(c):>10.1f} | "
              f"{g['cpu']:>23.1f} {g['wall_max']:>6.1f} {rt(g):>10.1f} | "
              f"{(g['cpu'] / c['cpu'] - 1) * 100:>+6.0f}% {rt(g) / rt(c):>9.2f}x")
    alone = [r for r in results if r["tool"] == "x264 alone" and not r["failed"]]
    if alone:
        print()
        print("x264 alone: castd's x264 options on each rung's pictures made beforehand (raw NV12 through the ffmpeg CLI),")
        print("what the ladder would cost if decoding and scaling were free; the most a GPU that cannot encode can save.")
        print(f"{'ladders':>7} | {'x264 CPU-s':>10} | {'castd all-CPU':>13} {'most saved':>10} | {'castd GPU':>9} {'saved':>6} "
              f"{'GPU path beyond x264':>24}")
        for x in alone:
            n = x["n"]
            c, g = by.get(("castd", "cpu", n)), by.get(("castd", "gpu", n))
            line = f"{n:>7} | {x['cpu']:>10.1f} | "
            line += f"{c['cpu']:>13.1f} {(1 - x['cpu'] / c['cpu']) * 100:>9.0f}% | " if c and not c["failed"] else f"{'':>13} {'':>10} | "
            if c and g and not c["failed"] and not g["failed"]:
                line += (f"{g['cpu']:>9.1f} {(1 - g['cpu'] / c['cpu']) * 100:>5.0f}% "
                         f"{(g['cpu'] - x['cpu']) / (n * a.seconds):>11.3f} CPU-s/s")
            print(line)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=1)
    bad = [r for r in results if r["failed"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
