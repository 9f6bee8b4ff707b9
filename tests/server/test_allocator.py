"""The server's allocator policy (vqs/server/allocator.py): a fetch answer's buffers reuse heap pages."""

import ctypes.util
import subprocess
import sys

import pytest

# a stored-batch answer's allocation pattern: three ~1 MiB batch reads joined into one body
_ANSWERS = """
import resource, sys
if sys.argv[1] == "policy":
    from vqs.server.allocator import keep_large_buffers
    assert keep_large_buffers()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
before = faults()
for _ in range(100):
    sizes = [1_090_508] * 3
    parts = [bytes(n) for n in sizes]
    body = b"".join(parts)
    del parts, body
print(faults() - before)
"""


def _faults(script, mode: str) -> int:
    out = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None,
                    reason="mallopt is glibc's")
def test_answer_buffers_are_not_faulted_in_anew_per_answer(tmp_path):
    # 100 answers of ~6.5 MiB allocated: ~160,000 page faults when each comes from fresh
    # pages; with the policy, the pages of the first answers are reused. (A script file, not
    # -c: glibc's adaptive thresholds depend on what the interpreter allocated before.)
    script = tmp_path / "answers.py"
    script.write_text(_ANSWERS)
    default = _faults(script, "default")
    if default < 50_000:
        pytest.skip(f"this C library does not fault the pattern in anew without the policy ({default} faults)")
    assert _faults(script, "policy") < 20_000
