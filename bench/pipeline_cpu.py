#!/usr/bin/env python3
"""The CPU beside the GPU, stage by stage (make bench-pipeline on a GPU host).

    pipeline_cpu.py GPU_STAGES.jsonl OUT_DIR PIPELINE_WALL_SECONDS [--epochs E]

Runs every computing stage of a finished GPU pipeline again with --device cpu, on the same
inputs (the GPU run's dataset, model, features and SVM, so each stage does the same work
as its GPU twin), with all of the host's cores, and prints the table: GPU seconds, CPU
seconds, speed-up, per stage and for the whole pipeline.

ae-train on the CPU trains E epochs (default 1) of the same data and settings, and its
compute phase is scaled to the GPU run's epoch count (an epoch costs the same every
epoch: same images, same steps, the same validation and test passes); everything else
runs in full. Stages that do not compute on a device (cifar-convert, report) count with
their GPU-run time on both sides. Each CPU stage runs under bench/stage-timer.sh, so its
log line has the same phases as the GPU run's (OUT_DIR/cpu-stages.jsonl).
"""
import argparse
import json
import os
import subprocess
import sys

COMPUTING = ("ae-train", "ae-encode", "svm-fit", "svm-eval")


def option_value(argv, name):
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def with_option(argv, name, value):
    """argv with `name value` set (replacing a given value, or appended)."""
    out, i, done = [], 0, False
    while i < len(argv):
        a = argv[i]
        if a == name:
            out += [name, value]
            i += 2
            done = True
            continue
        if a.startswith(name + "="):
            out += [name, value]
            i += 1
            done = True
            continue
        out.append(a)
        i += 1
    return out if done else out + [name, value]


def without_flag(argv, *names):
    return [a for a in argv if a not in names]


def cpu_command(stage, out_dir, epochs):
    argv = list(stage["argv"])
    tool = stage["stage"]
    argv = with_option(argv, "--device", "cpu")
    argv = without_flag(argv, "--json", "--resume")
    # provenance names the GPU run's file otherwise; the CPU copy is a file of its own
    argv = [a for i, a in enumerate(argv) if a != "--record-output-as" and (i == 0 or argv[i - 1] != "--record-output-as")]
    out = option_value(argv, "-o") or option_value(argv, "--output")
    if out is None:
        raise SystemExit(f"pipeline_cpu: the {tool} stage has no -o in {argv}")
    name = "cpu-" + os.path.basename(out).lstrip(".")
    argv = with_option(argv, "-o" if option_value(argv, "-o") else "--output", os.path.join(out_dir, name))
    gpu_epochs = None
    if tool == "ae-train":
        gpu_epochs = int(option_value(argv, "--epochs") or 20)
        argv = with_option(argv, "--epochs", str(min(epochs, gpu_epochs)))
    return argv, gpu_epochs


def scaled_wall(stage, gpu_epochs, cpu_epochs):
    """The CPU stage's wall time, its compute phase scaled to the GPU run's epochs."""
    wall = stage["wall"]
    if gpu_epochs is None or cpu_epochs >= gpu_epochs:
        return wall, False
    phases = (stage.get("summary") or {}).get("phases") or {}
    compute = phases.get("compute")
    if compute is None:  # no phases: scale the whole run (an upper bound)
        return wall * gpu_epochs / cpu_epochs, True
    return wall + compute * (gpu_epochs / cpu_epochs - 1), True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpu_stages")
    ap.add_argument("out_dir")
    ap.add_argument("gpu_pipeline_wall", type=float)
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    gpu = [json.loads(line) for line in open(args.gpu_stages) if line.strip()]
    if any("argv" not in s for s in gpu):
        raise SystemExit("pipeline_cpu: the stage log has no command lines (bench/stage-timer.sh records them)")
    os.makedirs(args.out_dir, exist_ok=True)
    cpu_log = os.path.join(args.out_dir, "cpu-stages.jsonl")
    open(cpu_log, "w").close()
    env = dict(os.environ, STAGE_LOG=cpu_log)
    timer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stage-timer.sh")
    rows = []
    for s in gpu:
        tool = s["stage"]
        if tool not in COMPUTING:
            rows.append((tool, s["wall"], s["wall"], "no device: the GPU run's time on both sides"))
            continue
        argv, gpu_epochs = cpu_command(s, args.out_dir, args.epochs)
        print(f"pipeline_cpu: {tool} --device cpu ...", file=sys.stderr, flush=True)
        with open(os.path.join(args.out_dir, f"cpu-{tool}.log"), "w") as log:
            rc = subprocess.call([timer] + argv, env=env, stdout=subprocess.DEVNULL, stderr=log)
        if rc != 0:
            raise SystemExit(f"pipeline_cpu: {tool} --device cpu failed (exit {rc}), see {log.name}")
        cpu_stage = [json.loads(line) for line in open(cpu_log) if line.strip()][-1]
        wall, scaled = scaled_wall(cpu_stage, gpu_epochs, args.epochs)
        note = (f"{args.epochs} of {gpu_epochs} epochs run, compute scaled per epoch" if scaled else "full run")
        rows.append((tool, s["wall"], wall, note))

    gpu_sum = sum(r[1] for r in rows)
    cpu_sum = sum(r[2] for r in rows)
    overhead = args.gpu_pipeline_wall - gpu_sum  # Make's own time, the same on both sides
    print(f"| stage | GPU s | CPU s ({os.cpu_count()} cores) | GPU speed-up | CPU side |")
    print("|---|---|---|---|---|")
    for tool, g, c, note in rows:
        print(f"| {tool} | {g:.2f} | {c:.2f} | {c / g:.1f}x | {note} |")
    print(f"| whole pipeline | {args.gpu_pipeline_wall:.2f} | {cpu_sum + overhead:.2f} | "
          f"{(cpu_sum + overhead) / args.gpu_pipeline_wall:.1f}x | stages + Make's {overhead:.2f} s |")


if __name__ == "__main__":
    main()
