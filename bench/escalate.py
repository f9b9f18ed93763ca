#!/usr/bin/env python3
"""Escalation against each fixed setting alone, interleaved (docs/params.md, "Escalation").

A hot set rewritten faster than a capped link moves it, at a 10 ms downtime
limit: each setting migrates it in turn, RUNS times, and the table gives the
outcome, total time and downtime as median [min-max] over the runs.
Usage: bench/escalate.py BUILD [--runs N] [--rate PAGES_PER_S] [--cap RATE]
"""
import argparse, json, statistics, subprocess

SETTINGS = [
    ('limit 10 ms alone', []),
    ('limit 2000 ms alone', ['--downtime-limit', '2000']),
    ('auto-converge alone', ['--auto-converge']),
    ('postcopy auto alone', ['--postcopy-after', 'auto']),
    ('escalate', ['--set', 'escalate=1', '--set', 'escalate-downtime-max-us=2000000',
                  '--set', 'escalate-window-rounds=3', '--postcopy']),
    ('escalate, max 50 ms', ['--set', 'escalate=1', '--set', 'escalate-downtime-max-us=50000',
                             '--set', 'escalate-window-rounds=3', '--postcopy']),
]


def run(godwit, extra, a):
    cmd = [godwit, 'demo', '--accel', 'soft', '--memory', a.memory, '--vcpus', '2',
           '--workload', f'dirty:ws={a.ws},pattern=page,rate={a.rate}', '--max-bandwidth', a.cap,
           '--downtime-limit', '10', '--converge-timeout', str(a.timeout_ms), '--json'] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        d = json.loads(p.stdout)
    except ValueError:
        return {'status': f'exit {p.returncode}'}
    e = d.get('escalate') or {}
    steps = f"{e.get('steps', 0)} to {e.get('step', 'none')}, limit {e.get('downtime-limit', 0):.0f} ms"
    return {'status': d.get('status'), 'total': d.get('total-time'), 'downtime': d.get('downtime'),
            'postcopy': 'postcopy' in d, 'steps': steps}


def fmt(v):
    v = [x for x in v if x is not None]
    return f'{statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]' if v else '-'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('build')
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--memory', default='1G')
    ap.add_argument('--ws', default='256M')
    ap.add_argument('--rate', type=int, default=100000)
    ap.add_argument('--cap', default='256M')
    ap.add_argument('--timeout-ms', type=int, default=15000)
    a = ap.parse_args()
    godwit = a.build + '/tools/godwit'
    res = {name: [] for name, _ in SETTINGS}
    for i in range(a.runs):
        for name, extra in SETTINGS:	# interleaved: one run of each setting per pass
            r = run(godwit, extra, a)
            res[name].append(r)
            print(f'run {i} {name}: {r}', flush=True)
    print('| setting | outcomes | total ms | downtime ms (completed) | steps |')
    print('|---|---|---:|---:|---|')
    for name, _ in SETTINGS:
        rs = res[name]
        outs = ', '.join(sorted(set(f"{sum(1 for x in rs if x['status'] == s)} {s}" for s in {x['status'] for x in rs})))
        done = [x for x in rs if x['status'] == 'completed']
        print(f"| {name} | {outs} | {fmt([x.get('total') for x in rs])} | {fmt([x['downtime'] for x in done])} | "
              f"{'; '.join(sorted({x.get('steps', '') for x in rs}))} |")


if __name__ == '__main__':
    main()
