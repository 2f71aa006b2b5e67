"""The ``--gost-*`` options as data: one parser each, and the rerun command they give."""

import dataclasses
import re

import pytest

from pytest_gostcnn.judgement.compliance import meets_image_count
from pytest_gostcnn.performance.plan import plan
from pytest_gostcnn.run.option_definitions import BY_NAME, OPTIONS, RERUN_ORDER
from pytest_gostcnn.run.options import Options


def test_every_option_is_parsed_by_its_own_parser_to_its_default():
    options = Options.parse({})
    assert (options.backend, options.dtype, options.batch, options.mode, options.seed) == (
        "numpy",
        "float32",
        2,
        "both",
        0,
    )
    assert options.modes == ("training", "inference") and options.given == frozenset()


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("batch", "0", "--gost-batch=0: must be an integer from 1 to 1024"),
        ("batch", "1_0", "--gost-batch=1_0: not an integer"),
        ("mode", "train", "--gost-mode=train: choose one of training, inference, both"),
        ("dtype", "float64", "--gost-dtype=float64: not a data type of the standard"),
        ("rmse_threshold", "-1", "--gost-rmse-threshold=-1: must be a finite number >= 0"),
        ("profile", "medium", "--gost-profile=medium: choose one of quick, full"),
        ("images", "0", "--gost-images=0: must be an integer from 1 to"),
        ("images", "5e3", "--gost-images=5e3: not an integer"),
        # 10^12 images would run for a century: a slip, not a plan.
        ("images", "1000000000000", "--gost-images=1000000000000: must be an integer from 1 to"),
        ("peak", "fast", "--gost-peak=fast: the peak must be a positive number of MAC/s"),
        ("report", "", "--gost-report=: empty; give a file name"),
        ("networks", "", "--gost-networks=: names no network; give some (M G V S R Sh"),
        ("networks", " , ", "--gost-networks= , : names no network"),
        ("compare", "absent.json", "--gost-compare=absent.json: no such file"),
        ("compare_fail", "120%", "--gost-compare-fail=120%: must be a number of percent from 0"),
        ("compare_fail", "five", "--gost-compare-fail=five: not a number of percent"),
    ],
)
def test_a_bad_option_is_a_value_error_naming_it(name, text, says):
    with pytest.raises(ValueError, match="^" + says.replace("(", r"\(").replace(")", r"\)")):
        Options.parse({name: text})


@pytest.mark.parametrize(
    ("texts", "says"),
    [
        (["device"], "--gost-backend-option=device: give KEY=VALUE"),
        (["=cpu"], "--gost-backend-option==cpu: the key '' is not a name"),
        (["2x=1"], "--gost-backend-option=2x=1: the key '2x' is not a name"),
        (["device=cpu", "device=cuda"], "--gost-backend-option=device=cuda: device is given twice"),
    ],
)
def test_a_bad_backend_option_is_a_value_error_naming_it(texts, says):
    with pytest.raises(ValueError, match="^" + re.escape(says)):
        Options.parse({"backend_option": texts})


def test_backend_options_come_in_order_from_the_command_line_or_the_ini_file():
    given = Options.parse({"backend_option": ["device=cuda:1", "threads=4", "path=a=b"]})
    assert given.backend_options == {"device": "cuda:1", "threads": "4", "path": "a=b"}
    assert Options.parse({"backend_option": "device=cpu  threads=2"}).backend_option == (
        ("device", "cpu"),
        ("threads", "2"),
    )
    assert Options.parse({}).backend_options == {}
    # A rerun repeats each, right after the backend; none given, none repeated.
    assert given.args()[:4] == [
        "--gost-backend=numpy",
        "--gost-backend-option=device=cuda:1",
        "--gost-backend-option=threads=4",
        "--gost-backend-option=path=a=b",
    ]
    assert not any("backend-option" in arg for arg in Options.parse({}).args())


def test_the_command_line_shares_the_parser_and_names_its_own_flag():
    with pytest.raises(ValueError, match=r"^--batch=0: must be an integer from 1 to 1024"):
        BY_NAME["batch"].value("0", flag="--batch")


def test_a_rerun_repeats_what_was_chosen_in_a_fixed_order_and_narrows_it():
    options = Options.parse({"rmse_threshold": "0", "profile": "full", "tables": "t"})
    assert options.args(networks="S", mode="training") == [
        "--gost-backend=numpy",
        "--gost-dtype=float32",
        "--gost-batch=2",
        "--gost-seed=0",
        "--gost-tables=t",
        "--gost-rmse-threshold=0.0",  # 0 is a choice, not "not given"
        "--gost-profile=full",
        "--gost-networks=S",
        "--gost-mode=training",
    ]


def test_a_rerun_leaves_out_defaults_empty_values_the_report_and_the_peak(tmp_path):
    options = Options.parse(
        {"tables": "", "mode": "both", "peak": "1T", "report": str(tmp_path / "r.json")}
    )
    assert options.args() == [
        "--gost-backend=numpy",
        "--gost-dtype=float32",
        "--gost-batch=2",
        "--gost-seed=0",
    ]
    assert options.args(local_cell=3)[-1] == "--gost-local-cell=3"


def test_every_option_is_declared_once_with_a_flag_of_its_name():
    names = [option.name for option in OPTIONS]
    assert len(names) == len(set(names))
    fields = {f.name for f in dataclasses.fields(Options)} - {"given"}
    assert set(names) == fields == set(RERUN_ORDER)
    assert [option.flag for option in OPTIONS][:3] == [
        "--gost-backend",
        "--gost-dtype",
        "--gost-batch",
    ]


def test_a_rerun_repeats_the_image_count_after_the_profile_would_stand():
    options = Options.parse({"images": "5000", "seed": "3"})
    assert options.args(networks="R") == [
        "--gost-backend=numpy",
        "--gost-dtype=float32",
        "--gost-batch=2",
        "--gost-seed=3",
        "--gost-images=5000",
        "--gost-networks=R",
    ]


def test_an_image_count_runs_ceil_n_over_b_rounds_and_is_labelled_with_it():
    run_plan = plan("quick", 3, images=5000)
    # ceil(5000 / 3) = 1667 rounds of 3: two images more than asked, never fewer.
    assert (run_plan.rounds, run_plan.images) == (1667, 5001)
    assert (run_plan.profile, run_plan.label) == (None, "images=5000")
    assert not meets_image_count(run_plan.profile, run_plan.requested)


def test_an_image_count_of_a_million_is_the_full_profiles_rounds_and_meets_section_9_3():
    assert plan("quick", 2, images=1_000_000).rounds == plan("full", 2).rounds == 500_000
    assert meets_image_count(None, 1_000_000)
    assert meets_image_count(None, 2_000_000)  # a minimum, not an exact count


def test_an_image_count_below_a_million_is_never_compliant_whatever_the_rounding_adds():
    below = plan("quick", 2, images=999_999)
    # 500,000 rounds, yet asked fewer
    assert below.images == 1_000_000 and not meets_image_count(below.profile, below.requested)
