"""HumanEval's 164 problems judged through verl's own SandboxFusion client.

Each problem is judged twice by verl's check_correctness against the
server at argv[1] (a /run_code URL): its canonical solution must be judged
correct (True), and a wrong solution (the body replaced by one that returns
None) must not be. The program is the prompt, the body, HumanEval's
check(), and a call to it: silent on success, an AssertionError otherwise,
so the one test case is empty stdin and empty expected stdout.

Prints one summary line and exits non-zero when any verdict is off.
"""
import gzip
import json
import sys
from concurrent.futures import ThreadPoolExecutor

from verl.utils.reward_score.sandbox_fusion.utils import check_correctness

WRONG_BODY = "    return None\n"


def judge(url, problem, body):
    code = "%s%s\n\n%s\ncheck(%s)\n" % (problem["prompt"], body, problem["test"], problem["entry_point"])
    results, metadata = check_correctness(url, {"inputs": [""], "outputs": [""]}, code, timeout=10)
    return results[0], metadata[0]


def main():
    url, data = sys.argv[1], sys.argv[2]
    with gzip.open(data, "rt") as f:
        problems = [json.loads(line) for line in f]

    def both(p):
        return judge(url, p, p["canonical_solution"]), judge(url, p, WRONG_BODY)

    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(both, problems))
    right = [p["task_id"] for p, ((r, _), _) in zip(problems, verdicts) if r is True]
    caught = [p["task_id"] for p, (_, (w, _)) in zip(problems, verdicts) if w is not True]
    print("%d problems: %d canonical judged correct, %d wrong judged wrong" % (len(problems), len(right), len(caught)))
    for p, ((r, meta), (w, _)) in zip(problems, verdicts):
        if r is not True:
            print("canonical misjudged:", p["task_id"], r, json.dumps(meta)[:400])
        if w is True:
            print("wrong solution judged correct:", p["task_id"])
    sys.exit(0 if len(right) == len(caught) == len(problems) else 1)


if __name__ == "__main__":
    main()
