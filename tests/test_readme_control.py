"""The README's scalable-topic control example runs as written."""

from pathlib import Path


def test_the_readme_control_example_runs() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Scalable-topic control") :]
    start = section.index("```python\n") + len("```python\n")
    example = section[start : section.index("```\n", start)]
    namespace: dict[str, object] = {}
    exec(compile(example, "README.md", "exec"), namespace)
    assert namespace["segment_id"] in (4, 5, 6, 7) and namespace["counter"] == 1
