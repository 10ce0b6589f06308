"""``cfl doctor`` (cflcore/doctor.py) on a CPU: its checks run and print, a failing or crashing check makes it exit
non-zero, ``--gpu`` without a GPU says so and exits 1, and the GPU tests' JUnit report is read per test, a
``control:`` skip apart. Its ``tests`` and ``benchmark`` checks take minutes on a CPU; docs/gpu.md quotes a run."""
from __future__ import annotations

import pytest
import torch

from cflcore import doctor
from cflcore.cli import main


def test_doctor_on_a_cpu_passes_and_counts_copies(capsys):
    assert main(["doctor", "--device", "cpu", "--checks", "env", "copies"]) == 0
    out = capsys.readouterr().out
    assert "[ok] env: device cpu" in out and "torch " + torch.__version__ in out
    assert "[ok] copies: 0 host-to-device transfers in round 1" in out and "round 0 " in out


def test_a_failing_check_makes_the_doctor_fail(capsys, monkeypatch):
    def broken(device, report):
        raise RuntimeError("CUDA error: no kernel image is available")

    monkeypatch.setitem(doctor.CHECK_FUNCTIONS, "env", broken)
    monkeypatch.setitem(doctor.CHECK_FUNCTIONS, "copies", lambda device, report: report.result("copies", False, "11"))
    assert main(["doctor", "--device", "cpu", "--checks", "env", "copies"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] env: RuntimeError: CUDA error" in out and "[FAIL] copies: 11" in out
    assert '{"failed": ["env", "copies"]}' in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_doctor_gpu_without_a_gpu_says_so(capsys):
    assert main(["doctor", "--gpu"]) == 1
    assert "[FAIL] gpu: no CUDA GPU: torch.cuda.is_available() is False" in capsys.readouterr().out


def test_the_junit_report_is_read_per_test(tmp_path):
    (tmp_path / "j.xml").write_text(
        '<testsuites><testsuite><testcase classname="t" name="test_a"/>'
        '<testcase classname="t" name="test_b"><failure message="assert 1 == 2">trace</failure></testcase>'
        '<testcase classname="t" name="test_c"><skipped message="control: the same bytes"/></testcase>'
        '</testsuite></testsuites>')
    assert doctor._junit_cases(tmp_path / "j.xml") == [("test_a", "passed", ""), ("test_b", "failed", "assert 1 == 2"),
                                                       ("test_c", "skipped", "control: the same bytes")]
