"""The README's Python example runs exactly as written."""

import re

from conftest import REPO, run_python


def test_readme_python_example_runs(domain):
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has a Python example"
    for code in blocks:
        done = run_python(code, timeout=120)
        assert done.returncode == 0, done.stderr
