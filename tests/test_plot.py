"""``python -m pytest_gostcnn plot REPORT -o FILE.svg``: a written report's evaluation drawn.

One real run makes the report every test starts from: six tiny official tables in both
modes, quick profile (``tests/gost_helpers.py``'s tiny directory), about a second.
A test that needs other ОРП values puts them in a copy and lets section 9.8's own
``evaluate`` give the dropped test and the first result, as the plugin would. The picture is
read back with ElementTree: bars, labels and lines are found by their ``class``, a network's
shapes by ``data-network``, a mode's panel by ``data-mode``.
"""

import copy
import json
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from gost_helpers import directory, suite

from pytest_gostcnn.__main__ import main
from pytest_gostcnn.judgement.evaluation import evaluate
from pytest_gostcnn.model.network import CYRILLIC
from pytest_gostcnn.reports.picture import draw

SVG = "{http://www.w3.org/2000/svg}"
ORDER = ["M", "G", "V", "S", "R", "Sh"]  # М Г В С Р Ш, the standard's order
TINY_QUICK = ("--gost-backend=numpy", "--gost-tables=tiny", "--gost-batch=1")
# ОРП values whose smallest is С (S), 1 %: the first result is (4 + 2 + 3 + 5 + 2.5) / 5.
EDITED = {"M": 4.0, "G": 2.0, "V": 3.0, "S": 1.0, "R": 5.0, "Sh": 2.5}
EDITED_FIRST = 3.3


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """The path of a real report: every network verified and timed in both modes."""
    run = suite(directory(tmp_path_factory.mktemp("plot")), *TINY_QUICK)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.path / "report.json"


@pytest.fixture
def report(written) -> dict:
    """A copy of the real report, for a test to change."""
    return copy.deepcopy(json.loads(written.read_text(encoding="utf-8")))


def with_results(report: dict, mode: str, results: dict[str, float]) -> dict:
    """``report`` with ``mode``'s ОРП results replaced, and its evaluation made anew."""
    evaluation = evaluate(mode, results, 100.0)
    (record,) = [e for e in report["evaluations"] if e["mode"] == mode]
    record.update(
        results_percent=dict(evaluation.results),
        missing=list(evaluation.missing),
        dropped=evaluation.dropped,
        first_result_percent=evaluation.first,
    )
    return report


def picture(report: dict) -> ElementTree.Element:
    return ElementTree.fromstring(draw(report).encode("utf-8"))


def panel(root: ElementTree.Element, mode: str) -> ElementTree.Element:
    (found,) = root.findall(f"{SVG}g[@data-mode='{mode}']")
    return found


def slots(panel: ElementTree.Element) -> list[ElementTree.Element]:
    """A panel's network slots, in the order drawn."""
    return [g for g in panel.findall(f"{SVG}g") if "network" in g.get("class", "").split()]


def bar(panel: ElementTree.Element, latin: str) -> ElementTree.Element:
    (slot,) = [g for g in slots(panel) if g.get("data-network") == latin]
    (rect,) = slot.findall(f"{SVG}rect")
    return rect


def texts(element: ElementTree.Element) -> list[str]:
    return [text.text or "" for text in element.iter(f"{SVG}text")]


def texts_of(element: ElementTree.Element, kind: str) -> list[str]:
    return [t.text or "" for t in element.iter(f"{SVG}text") if t.get("class") == kind]


def bottom(rect: ElementTree.Element) -> float:
    return float(rect.get("y")) + float(rect.get("height"))


# The bars.


def test_each_mode_has_six_bars_in_the_standards_order(report):
    root = picture(report)

    assert [g.get("data-mode") for g in root.findall(f"{SVG}g[@data-mode]")] == [
        "training",
        "inference",
    ]
    for mode in ("training", "inference"):
        drawn = slots(panel(root, mode))
        assert [g.get("data-network") for g in drawn] == ORDER
        labels = [texts_of(g, "network-label") for g in drawn]
        assert labels == [[f"{CYRILLIC[latin]} ({latin})"] for latin in ORDER]


def test_bar_heights_are_proportional_to_the_orp_values(report):
    chart = panel(picture(with_results(report, "training", EDITED)), "training")

    per_percent = {latin: float(bar(chart, latin).get("height")) / EDITED[latin] for latin in ORDER}
    assert max(per_percent.values()) == pytest.approx(min(per_percent.values()), rel=1e-3)
    assert len({bottom(bar(chart, latin)) for latin in ORDER}) == 1  # one baseline


def test_the_axis_reads_the_bars_in_whole_steps_above_the_tallest(report):
    chart = panel(picture(with_results(report, "training", EDITED)), "training")

    # The tallest, 5 %, with a tenth of headroom: six steps of 1 %.
    assert texts_of(chart, "tick") == [f"{tick} %" for tick in range(7)]
    grid = {
        text: float(line.get("y1"))
        for text, line in zip(
            texts_of(chart, "tick"), chart.findall(f"{SVG}line[@class='grid']"), strict=True
        )
    }
    assert grid["0 %"] == pytest.approx(bottom(bar(chart, "R")), abs=0.01)
    assert grid["5 %"] == pytest.approx(float(bar(chart, "R").get("y")), abs=0.02)


def test_a_real_runs_bars_stand_at_its_reported_orp(report):
    root = picture(report)
    for evaluation in report["evaluations"]:
        chart = panel(root, evaluation["mode"])
        results = evaluation["results_percent"]
        heights = {latin: float(bar(chart, latin).get("height")) for latin in ORDER}
        tallest = max(ORDER, key=results.get)
        for latin in ORDER:
            ratio = results[latin] / results[tallest]
            assert heights[latin] / heights[tallest] == pytest.approx(ratio, rel=1e-3)


def test_the_dropped_bar_is_the_smallest_and_marked_dropped(report):
    chart = panel(picture(with_results(report, "training", EDITED)), "training")

    marked = [g.get("data-network") for g in slots(chart) if "dropped" in g.get("class").split()]
    assert marked == ["S"]  # 1 %, the smallest of EDITED
    assert bar(chart, "S").get("fill") == "url(#dropped)"  # hatched
    assert all(bar(chart, latin).get("fill") != "url(#dropped)" for latin in ORDER if latin != "S")
    (values,) = chart.findall(f"{SVG}g[@class='values'][@data-network='S']")
    assert texts(values) == ["1 %", "dropped"]
    assert "dropped (smallest) С (S) 1 %" in " ".join(texts_of(chart, "evaluation"))


def test_the_first_result_line_stands_at_the_mean_of_the_other_five(report):
    chart = panel(picture(with_results(report, "training", EDITED)), "training")

    (line,) = chart.findall(f"{SVG}line[@class='first-result']")
    assert line.get("y1") == line.get("y2")
    tallest = bar(chart, "R")  # 5 %
    per_percent = float(tallest.get("height")) / 5.0
    height = bottom(tallest) - float(line.get("y1"))
    assert height / per_percent == pytest.approx(EDITED_FIRST, rel=1e-3)
    assert texts_of(chart, "first-result-label") == ["first result 3.3 %"]


def test_a_missing_network_is_drawn_as_missing_not_as_zero(report):
    five = {latin: value for latin, value in EDITED.items() if latin != "G"}
    chart = panel(picture(with_results(report, "inference", five)), "inference")

    (slot,) = [g for g in slots(chart) if g.get("data-network") == "G"]
    assert slot.get("class").split() == ["network", "missing"]
    assert bar(chart, "G").get("class") == "bar missing"
    assert bar(chart, "G").get("fill") == "none"
    assert "missing" in texts(slot)
    assert chart.findall(f"{SVG}g[@class='values'][@data-network='G']") == []
    # No evaluation without six results: no line, nothing dropped, and the reason said.
    assert chart.findall(f"{SVG}line[@class='first-result']") == []
    assert [g for g in slots(chart) if "dropped" in g.get("class").split()] == []
    assert texts_of(chart, "evaluation") == ["no first result: no result for Г (G)"]


# The verdicts beside the bars.


def test_each_panel_lists_the_section_8_verdict_of_every_network(report):
    (failed,) = [
        n
        for n in report["verification"]["networks"]
        if (n["network"], n["mode"]) == ("V", "inference")
    ]
    failed["verdict"] = "not correct"
    root = picture(report)

    for mode in ("training", "inference"):
        verdicts = dict(
            zip(
                texts_of(panel(root, mode), "verdict-network"),
                texts_of(panel(root, mode), "verdict"),
                strict=True,
            )
        )
        expected = "not correct" if mode == "inference" else "correct"
        assert verdicts == {
            "М (M)": "correct",
            "Г (G)": "correct",
            "В (V)": expected,
            "С (S)": "correct",
            "Р (R)": "correct",
            "Ш (Sh)": "correct",
        }


def test_each_panel_gives_the_designation_and_the_first_reason_it_is_not_compliant(report):
    root = picture(report)

    for evaluation in report["evaluations"]:
        chart = panel(root, evaluation["mode"])
        assert texts_of(chart, "heading") == [f"{evaluation['mode']}: {evaluation['designation']}"]
        assert evaluation["noncompliance_reasons"][0].startswith("quick profile")
        compliance = " ".join(texts_of(chart, "compliance"))
        assert compliance == f"not compliant: {evaluation['noncompliance_reasons'][0]}"


def test_a_compliant_evaluation_says_compliant(report):
    report["evaluations"][0].update(compliant=True, noncompliance_reasons=[])

    chart = panel(picture(report), report["evaluations"][0]["mode"])

    assert texts_of(chart, "compliance") == ["compliant"]


def test_the_title_gives_the_backend_its_device_dtype_batch_and_profile(report):
    backend = report["system"]["backend"]

    (facts,) = texts_of(picture(report), "facts")

    assert facts == (
        f"backend numpy {backend['version']} on {backend['device']}; dtype float32; batch 1; "
        "profile quick"
    )


def test_the_title_of_a_run_with_an_image_count_gives_the_count(report):
    report["options"].update(profile=None, images=5)

    (facts,) = texts_of(picture(report), "facts")

    assert facts.endswith("; batch 1; images 5 per test")


def test_cyrillic_and_markup_in_the_report_survive_as_text(report):
    report["system"]["backend"]["device"] = 'Процессор <Эльбрус> & "8С"'

    svg = draw(report)

    assert "Процессор &lt;Эльбрус&gt; &amp;" in svg
    (facts,) = texts_of(ElementTree.fromstring(svg.encode("utf-8")), "facts")
    assert 'on Процессор <Эльбрус> & "8С";' in facts


def test_an_incomplete_run_is_said_and_a_complete_one_is_not(report):
    assert texts_of(picture(report), "incomplete") == []  # the report says nothing of it
    report["complete"] = False

    assert texts_of(picture(report), "incomplete") == ["incomplete run"]


# The command.


def test_the_command_writes_the_picture_of_a_real_report(written, tmp_path):
    output = tmp_path / "evaluation.svg"

    done = subprocess.run(
        [sys.executable, "-m", "pytest_gostcnn", "plot", str(written), "-o", str(output)]
        + ["--tables", str(written.parent / "tiny")],
        capture_output=True,
        text=True,
        check=False,
    )

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"wrote {output}\n"
    root = ElementTree.fromstring(output.read_bytes())
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f"{SVG}g[@data-mode]")) == 2
    assert list(tmp_path.iterdir()) == [output]  # no temporary file beside it


def refused(capsys, tmp_path: Path, report_path: Path, output: Path, says: str, *more: str) -> None:
    """The command exits 1 with one line on stderr that says ``says``, and writes nothing."""
    before = set(tmp_path.rglob("*"))

    status = main(["plot", str(report_path), "-o", str(output), *more])

    captured = capsys.readouterr()
    assert status == 1
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: ")
    assert says in captured.err
    assert set(tmp_path.rglob("*")) == before  # no picture, no temporary file


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no such file"),
        ("{not json", "not JSON (line 1, column 2"),
        ('{"tables": 6}', 'JSON, but not a --gost-report (no "format")'),
        ("[]", 'JSON, but not a --gost-report (no "format")'),
        ('{"format": "pytest-gostcnn report 1"}', "format 'pytest-gostcnn report 1'; this"),
        (b"\xff\xfe", "not UTF-8 text"),
    ],
    ids=["missing", "not-json", "other-json", "a-list", "format-1", "not-utf8"],
)
def test_a_file_that_is_not_a_report_is_one_line_naming_it(capsys, tmp_path, content, says):
    path = tmp_path / "no-report.json"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif content is not None:
        path.write_bytes(content)

    refused(capsys, tmp_path, path, tmp_path / "out.svg", f"{path}: {says}")


def test_a_report_whose_orp_was_edited_does_not_check_and_is_refused(
    capsys, tmp_path, report, written
):
    report["benchmarks"][0]["orp_percent"] *= 2
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    tables = str(written.parent / "tiny")

    refused(
        capsys,
        tmp_path,
        path,
        tmp_path / "out.svg",
        f"{path}: does not check",
        *("--tables", tables),
    )


def test_a_tables_directory_that_does_not_exist_is_refused_naming_it(capsys, written, tmp_path):
    for command in ("plot", "check", "evaluate", "compare"):
        args = [command, str(written), *([str(written)] if command == "compare" else [])]
        args += [*(["-o", str(tmp_path / "o.svg")] if command == "plot" else [])]
        with pytest.raises(SystemExit) as exited:
            main([*args, "--tables", "/no/such/dir"])
        assert exited.value.code == 2
        (line,) = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert "/no/such/dir: no such directory" in line


def test_a_report_with_nothing_benchmarked_is_one_line(capsys, tmp_path):
    run = suite(directory(tmp_path), *TINY_QUICK, "--gost-mode=inference", "-k", "layer")
    assert run.report["evaluations"] == []

    says = f"{run.path / 'report.json'}: no result to draw: no performance test finished"
    refused(capsys, tmp_path, run.path / "report.json", tmp_path / "out.svg", says)


def test_an_evaluation_without_its_results_is_one_line(capsys, tmp_path, report):
    del report["evaluations"][1]["results_percent"]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")

    says = f"{path}: not a whole report: report.evaluations[1]: 'results_percent' is missing"
    refused(capsys, tmp_path, path, tmp_path / "out.svg", says)


@pytest.mark.parametrize(
    ("percent", "says"),
    [(-1.0, "-1.0 is below the minimum 0"), (float("nan"), "NaN is not number")],
    ids=["negative", "nan"],
)
def test_a_result_that_is_not_a_percent_is_one_line(capsys, tmp_path, report, percent, says):
    report["evaluations"][0]["results_percent"]["G"] = percent
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report), encoding="utf-8")  # NaN: Python's json writes it

    where = "report.evaluations[0].results_percent.G"
    refused(
        capsys, tmp_path, path, tmp_path / "out.svg", f"{path}: not a whole report: {where}: {says}"
    )


def test_output_into_a_missing_folder_is_one_line(capsys, tmp_path, written):
    output = tmp_path / "no" / "such" / "evaluation.svg"

    refused(
        capsys,
        tmp_path,
        written,
        output,
        f"-o {output}: folder {output.parent} does not",
        "--tables",
        str(written.parent / "tiny"),
    )


@pytest.mark.parametrize("name", ["evaluation.png", "evaluation.pdf", "evaluation"])
def test_output_the_command_does_not_write_is_refused(capsys, tmp_path, written, name):
    output = tmp_path / name

    refused(
        capsys,
        tmp_path,
        written,
        output,
        f"-o {output}: plot writes SVG only",
        "--tables",
        str(written.parent / "tiny"),
    )


def test_a_failed_write_leaves_the_old_picture_and_no_temporary_file(
    capsys, tmp_path, written, monkeypatch
):
    output = tmp_path / "evaluation.svg"
    output.write_text("the old picture", encoding="utf-8")

    def full_disk(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pytest_gostcnn.reports.files.os.replace", full_disk)
    says = f"-o {output}: cannot write in {tmp_path} (No space left"
    refused(capsys, tmp_path, written, output, says, "--tables", str(written.parent / "tiny"))
    assert output.read_text(encoding="utf-8") == "the old picture"


def test_output_onto_the_report_itself_is_refused_and_keeps_the_report(capsys, tmp_path, written):
    path = tmp_path / "report.json"
    path.write_bytes(written.read_bytes())

    refused(
        capsys,
        tmp_path,
        path,
        path,
        f"-o {path}: is the report itself",
        "--tables",
        str(written.parent / "tiny"),
    )
    assert path.read_bytes() == written.read_bytes()
