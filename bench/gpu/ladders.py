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


def run_batch(make_cmd, n, input_path, tmp):
    """Start n processes at once, each reading input_path on stdin; wait for all."""
    procs = []
    t0 = time.monotonic()
    for i in range(n):
        cmd, label = make_cmd(i)
        out = open(os.path.join(tmp, f"{label}-{i}.out"), "wb")
        err = open(os.path.join(tmp, f"{label}-{i}.err"), "wb")
        stdin = open(input_path, "rb")
        p = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=err, env=CHILD_ENV)
        procs.append((p, out, err, stdin, label, i))
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
            f.close()
        if p.returncode != 0:
            tail = open(os.path.join(tmp, f"{label}-{i}.err"), "rb").read()[-600:].decode(errors="replace")
            outs = open(os.path.join(tmp, f"{label}-{i}.out"), "rb").read()[-600:].decode(errors="replace")
            failed.append(f"{label} #{i} exit {p.returncode}: {tail.strip()} {outs.strip()}")
    return {"n": n, "cpu": cpu, "wall_max": max(walls.values()), "wall_mean": sum(walls.values()) / n,
            "failed": failed}


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
        for n in [int(x) for x in a.counts.split(",") if x]:
            for mode in modes:
                label = f"castd-{mode}-{n}"

                def make(i, mode=mode, label=label):
                    d = os.path.join(tmp, f"hls-{label}-{i}")
                    os.makedirs(d, exist_ok=True)
                    cfg = json.dumps(worker_config(d, mode == "gpu", a.device))
                    return [a.castd, "--log-level", "info", "worker", "--config", cfg], label

                r = run_batch(make, n, a.input, tmp)
                r.update(tool="castd", mode=mode, encoders=started_encoders(tmp, label))
                results.append(r)
                print(f"# {label}: cpu {r['cpu']:.1f} s, wall {r['wall_max']:.1f} s, {r['encoders']}", flush=True)
                for f in r["failed"][:3]:
                    print(f"#   FAILED {f}", flush=True)
                for i in range(n):
                    shutil.rmtree(os.path.join(tmp, f"hls-{label}-{i}"), ignore_errors=True)
        clis = [(tool, path) for tool, path in (("ffmpeg CLI", a.ffmpeg), ("ffmpeg static", a.ffmpeg_static)) if path]
        for tool, path in clis:
            for n in [int(x) for x in a.ffmpeg_counts.split(",") if x]:
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
    for tool, n in sorted({(r["tool"], r["n"]) for r in results}, key=lambda k: (k[0] != "castd", k[0], k[1])):
        c, g = by.get((tool, "cpu", n)), by.get((tool, "gpu", n))
        if not c or not g or c["failed"] or g["failed"]:
            print(f"{tool:<12} {n:>7} | failed: see the lines above")
            continue
        rt = lambda r: n * a.seconds / r["wall_max"]
        print(f"{tool:<12} {n:>7} | {c['cpu']:>14.1f} {c['wall_max']:>6.1f} {rt(c):>10.1f} | "
              f"{g['cpu']:>23.1f} {g['wall_max']:>6.1f} {rt(g):>10.1f} | "
              f"{(g['cpu'] / c['cpu'] - 1) * 100:>+6.0f}% {rt(g) / rt(c):>9.2f}x")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=1)
    bad = [r for r in results if r["failed"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
