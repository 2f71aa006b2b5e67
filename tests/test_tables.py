"""Network tables as YAML data (section 7, Appendix Б): what the loader accepts and rejects.

A bad table is rejected with a ``TableError`` whose message names the file, the row (as
``<file>: row N:``) and the problem, so that the person holding the table can fix it.
"""

import os
import re
from pathlib import Path

import pytest
import yaml

from pytest_gostcnn.__main__ import main
from pytest_gostcnn.model.layers import MapRef
from pytest_gostcnn.model.network import TableError, UnknownNetworkError, network_key
from pytest_gostcnn.model.table_files import (
    TABLE_SETS,
    TABLE_SUFFIXES,
    load_network,
    load_networks,
    load_table,
    table_set_dir,
)

HEADER = """\
letter: {letter}
name: test network
provenance: reconstruction
input: {{X: {x}, Y: {y}, L: {channels}}}
layers:
"""

CONV_3X3 = "Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1"
ONE_ROW = f"  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}\n"


def write_table(
    directory: Path,
    rows: str,
    *,
    file: str = "table.yaml",
    letter: str = "Р",
    x: int = 8,
    y: int = 8,
    channels: int = 4,
) -> Path:
    """A table file: the standard header, then ``rows`` (YAML list items, one per line)."""
    path = directory / file
    header = HEADER.format(letter=letter, x=x, y=y, channels=channels)
    path.write_text(header + rows, encoding="utf-8")
    return path


def rejection(path: Path) -> str:
    with pytest.raises(TableError) as excinfo:
        load_table(path)
    return str(excinfo.value)


def row_rejection(directory: Path, rows: str, row: int, **header: int | str) -> str:
    """The message for a table rejected at ``row``; it must start by naming file and row."""
    path = write_table(directory, rows, **header)
    message = rejection(path)
    assert message.startswith(f"{path}: row {row}: "), message
    return message


# --- rows that are not a layer -------------------------------------------------------


@pytest.mark.parametrize("type_text", ["convolution", "[conv]"])
def test_unknown_layer_type_is_rejected(tmp_path, type_text):
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {{n: 2, type: {type_text}, in1: 1}}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert "unknown layer type" in message
    assert "conv, maxpool, avgpool" in message  # the message lists the known types


def test_missing_parameter_is_rejected(tmp_path):
    rows = "  - {n: 1, type: conv, F: 4, Rx: 3, Ry: 3, S: 1, Px: 1}\n"
    message = row_rejection(tmp_path, rows, row=1)
    assert "missing parameter(s) Py" in message


def test_extra_parameter_is_rejected(tmp_path):
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {{n: 2, type: relu, in1: 1, F: 4}}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert "unexpected parameter(s) F" in message


# --- inputs --------------------------------------------------------------------------


@pytest.mark.parametrize("named", [2, 3], ids=["itself", "later-row"])
def test_input_naming_a_row_that_is_not_earlier_is_rejected(tmp_path, named):
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {{n: 2, type: relu, in1: {named}}}
  - {{n: 3, type: relu, in1: 1}}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert f"in1={named} names row {named}, which is not an earlier row" in message


def test_input_naming_a_missing_row_is_rejected(tmp_path):
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {{n: 2, type: relu, in1: 1}}
  - {{n: 4, type: relu, in1: 3}}
"""
    message = row_rejection(tmp_path, rows, row=4)
    assert "in1=3 names row 3, which is not in the table" in message


def test_output_number_on_a_layer_that_is_not_split_is_rejected(tmp_path):
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {{n: 2, type: relu, in1: "1.1"}}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert "row 1 is a conv layer with one output" in message
    assert ".1/.2 names the outputs of a split layer" in message


def test_split_layer_named_without_output_number_is_rejected(tmp_path):
    rows = """\
  - {n: 1, type: split, L1: 2}
  - {n: 2, type: relu, in1: 1}
  - {n: 3, type: concat, in1: 2, in2: "1.2"}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert "names split row 1; write 1.1 or 1.2" in message


def test_unquoted_split_output_is_read_as_that_output(tmp_path):
    rows = """\
  - {n: 1, type: split, L1: 1}
  - {n: 2, type: relu, in1: 1.1}
  - {n: 3, type: concat, in1: 2, in2: 1.2}
"""
    path = write_table(tmp_path, rows)
    # YAML reads the unquoted 1.1 as a float; the loader reads its text.
    assert yaml.safe_load(path.read_text(encoding="utf-8"))["layers"][1]["in1"] == 1.1
    network = load_table(path)
    assert network.layers[1].inputs == (MapRef(1, 0),)
    assert network.layers[2].inputs == (MapRef(2), MapRef(1, 1))
    assert network.layers[1].in_shapes == ((8, 8, 1),)
    assert network.layers[2].in_shapes == ((8, 8, 1), (8, 8, 3))


@pytest.mark.parametrize(
    ("row_text", "given"),
    [
        ("{n: 2, type: eltwise, in1: 1}", 1),
        ("{n: 2, type: relu, in1: 1, in2: 1}", 2),
    ],
    ids=["eltwise-with-one", "relu-with-two"],
)
def test_wrong_number_of_inputs_is_rejected(tmp_path, row_text, given):
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {row_text}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert f"input(s), the row gives {given}" in message


def test_second_input_without_first_is_rejected(tmp_path):
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {{n: 2, type: relu, in1: "-", in2: 1}}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert "in1 is empty but in2 is given" in message


@pytest.mark.parametrize("in1", ["0", "1", "2"])
def test_first_row_naming_an_input_is_rejected(tmp_path, in1):
    # standard.md §5: the network input is the first row's input; the row cannot name another.
    rows = f"""\
  - {{n: 1, type: relu, in1: {in1}}}
  - {{n: 2, type: relu, in1: 1}}
"""
    message = row_rejection(tmp_path, rows, row=1)
    assert "the first row reads the network input" in message


# --- shapes --------------------------------------------------------------------------


def test_concat_of_maps_of_different_width_and_height_is_rejected(tmp_path):
    rows = f"""\
  - {{n: 1, type: conv, F: 2, {CONV_3X3}}}
  - {{n: 2, type: maxpool, in1: 1, Rx: 2, Ry: 2, S: 2, Px: 0, Py: 0}}
  - {{n: 3, type: concat, in1: 1, in2: 2}}
"""
    message = row_rejection(tmp_path, rows, row=3)
    assert "same width and height, got 8x8 and 4x4" in message


def test_eltwise_of_maps_of_different_depth_is_rejected(tmp_path):
    # Concat would accept these two maps; addition needs the whole shape equal.
    rows = f"""\
  - {{n: 1, type: conv, F: 2, {CONV_3X3}}}
  - {{n: 2, type: conv, in1: 1, F: 3, {CONV_3X3}}}
  - {{n: 3, type: eltwise, in1: 1, in2: 2}}
"""
    message = row_rejection(tmp_path, rows, row=3)
    assert "same shape, got (8, 8, 2) and (8, 8, 3)" in message


@pytest.mark.parametrize(
    ("l1", "problem"),
    [(0, "L1=0 must be positive"), (4, "L1=4 must lie in 1..3 (input L=4)")],
    ids=["zero", "whole-depth"],
)
def test_split_with_l1_outside_1_to_l_minus_1_is_rejected(tmp_path, l1, problem):
    rows = f"""\
  - {{n: 1, type: split, L1: {l1}}}
  - {{n: 2, type: concat, in1: "1.1", in2: "1.2"}}
"""
    message = row_rejection(tmp_path, rows, row=1, channels=4)
    assert problem in message


def test_shuffle_of_depth_not_divisible_by_groups_is_rejected(tmp_path):
    rows = f"""\
  - {{n: 1, type: conv, F: 6, {CONV_3X3}}}
  - {{n: 2, type: shuffle, in1: 1, G: 4}}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert "input L=6 is not divisible by G=4" in message


def test_window_larger_than_the_padded_map_is_rejected(tmp_path):
    rows = "  - {n: 1, type: maxpool, Rx: 7, Ry: 2, S: 1, Px: 1, Py: 0}\n"
    message = row_rejection(tmp_path, rows, row=1, x=4)
    assert "window Rx=7 is larger than the padded map (X=4 + 2*Px=1)" in message


def test_window_equal_to_the_padded_map_gives_one_output(tmp_path):
    # Note 3 of 6.2: a global pooling has the window equal to the whole map.
    rows = "  - {n: 1, type: avgpool, Rx: 6, Ry: 8, S: 1, Px: 1, Py: 0}\n"
    network = load_table(write_table(tmp_path, rows, x=4, y=8))
    assert network.layers[0].out_shapes == ((1, 1, 4),)


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ("F: 0, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1", "F=0 must be positive"),
        ("F: 4, Rx: 3, Ry: 3, S: 0, Px: 1, Py: 1", "S=0 must be positive"),
        ("F: 4, Rx: 0, Ry: 3, S: 1, Px: 1, Py: 1", "Rx=0 must be positive"),
    ],
    ids=["F", "S", "Rx"],
)
def test_non_positive_layer_size_is_rejected(tmp_path, params, problem):
    rows = f"  - {{n: 1, type: conv, {params}}}\n"
    message = row_rejection(tmp_path, rows, row=1)
    assert problem in message


def test_non_positive_input_size_is_rejected(tmp_path):
    path = write_table(tmp_path, ONE_ROW, x=0)
    message = rejection(path)
    assert message.startswith(f"{path}: ")
    assert "input X=0 must be a positive integer" in message


def test_negative_padding_is_rejected(tmp_path):
    rows = "  - {n: 1, type: conv, F: 4, Rx: 3, Ry: 3, S: 1, Px: 1, Py: -1}\n"
    message = row_rejection(tmp_path, rows, row=1)
    assert "Py=-1 must be non-negative" in message


# --- the table as a whole ------------------------------------------------------------


def test_duplicate_row_number_is_rejected(tmp_path):
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {{n: 2, type: relu, in1: 1}}
  - {{n: 2, type: relu, in1: 1}}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert "duplicate row number 2" in message
    assert "(list positions #2 and #3)" in message


def test_output_read_by_no_later_row_is_rejected(tmp_path):
    # Only the last row's output is the network output (standard.md §5).
    rows = f"""\
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
  - {{n: 2, type: relu, in1: 1}}
  - {{n: 3, type: relu, in1: 1}}
"""
    message = row_rejection(tmp_path, rows, row=2)
    assert "output 2 is not read by any later row" in message


@pytest.mark.parametrize(("read", "unread"), [("1.1", "1.2"), ("1.2", "1.1")])
def test_split_output_read_by_no_later_row_is_rejected(tmp_path, read, unread):
    # The message names the output as a table row would: n.1 or n.2, never a bare n.
    rows = f"""\
  - {{n: 1, type: split, L1: 1}}
  - {{n: 2, type: relu, in1: "{read}"}}
"""
    message = row_rejection(tmp_path, rows, row=1)
    assert f"output {unread} is not read by any later row" in message


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("provenance: reconstruction\n", "", "missing key(s) provenance"),
        ("name: test network\n", "name: x\ncomment: draft\n", "unknown key(s) comment"),
        ("letter: Р", "letter: R", "letter 'R' is not one of"),
        ("reconstruction", "guess", "provenance 'guess' must be one of reconstruction, official"),
    ],
    ids=["missing-key", "unknown-key", "latin-letter", "provenance"],
)
def test_bad_top_level_entry_is_rejected(tmp_path, old, new, problem):
    path = write_table(tmp_path, ONE_ROW)
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    message = rejection(path)
    assert message.startswith(f"{path}: ")
    assert problem in message


def test_invalid_yaml_is_rejected(tmp_path):
    path = write_table(tmp_path, "  - {n: 1, type: conv, F: 4\n")
    message = rejection(path)
    assert message.startswith(f"{path}: not valid YAML")


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("letter: Р\n", "letter: Ш\nletter: Р\n", "letter"),  # YAML alone would keep the last
        ("{n: 1, type: conv, F: 4,", "{n: 1, type: conv, F: 4, F: 8,", "F"),
    ],
    ids=["top-level", "in-a-row"],
)
def test_key_given_twice_is_rejected(tmp_path, old, new, key):
    path = write_table(tmp_path, ONE_ROW)
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    message = rejection(path)
    assert message.startswith(f"{path}: not valid YAML: the key '{key}' is given twice")


def test_yaml_merge_key_is_still_read(tmp_path):
    conv = "{n: 1, type: conv, F: 4, Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}"
    path = write_table(tmp_path, f"  - {{<<: {conv}, F: 6}}\n")  # F: 6 overrides the merged F
    (layer,) = load_table(path).layers
    assert layer.params["F"] == 6


def test_path_with_an_unknown_users_tilde_is_a_table_error():
    with pytest.raises(TableError, match="~no-such-user-here/tables"):
        load_networks("~no-such-user-here/tables")


def test_yaml_alias_is_rejected(tmp_path):
    # Nested aliases multiply: nine levels of ten would be a billion values.
    path = write_table(tmp_path, ONE_ROW)
    text = path.read_text(encoding="utf-8").replace("name: test network", "name: &n test\nx: *n")
    path.write_text(text, encoding="utf-8")
    message = rejection(path)
    assert message.startswith(f"{path}: not valid YAML: aliases (*name) are not allowed")


def test_table_that_is_not_a_regular_file_is_rejected_without_reading_it(tmp_path):
    fifo = tmp_path / "R.yaml"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    with pytest.raises(TableError, match=r"R\.yaml: not a regular file$"):
        load_networks(tmp_path)


def test_tables_directory_may_start_with_a_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "tables").mkdir()
    write_table(tmp_path / "tables", ONE_ROW)
    assert list(load_networks("~/tables")) == ["R"]


def test_table_nested_too_deeply_is_rejected(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("letter: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    assert rejection(path) == f"{path}: nested too deeply to be a network table"


@pytest.mark.parametrize("name", ["[a, b]", "12", "''"], ids=["list", "number", "empty"])
def test_name_that_is_not_text_is_rejected(tmp_path, name):
    path = write_table(tmp_path, ONE_ROW)
    text = path.read_text(encoding="utf-8").replace("name: test network", f"name: {name}")
    path.write_text(text, encoding="utf-8")
    assert rejection(path).startswith(f"{path}: name ")


def test_array_of_more_than_2_31_values_per_image_is_rejected(tmp_path):
    # 8 x 8 x 2**26 outputs: 2**32 values per image.
    message = row_rejection(tmp_path, f"  - {{n: 1, type: conv, F: {2**26}, {CONV_3X3}}}\n", row=1)
    assert f"output 1 8x8x{2**26} is more than 2**31 values" in message
    path = write_table(tmp_path, ONE_ROW, x=2**16, y=2**16)
    assert rejection(path) == (
        f"{path}: input {2**16}x{2**16}x4 is more than 2**31 values, "
        "beyond what this suite supports"
    )


# --- valid tables --------------------------------------------------------------------

ALL_SHAPES_ROWS = """\
  - {n: 1, type: conv, F: 4, Rx: 3, Ry: 3, S: 2, Px: 1, Py: 1}
  - {n: 2, type: relu, in1: 1}
  - {n: 3, type: split, in1: 2, L1: 1}
  - {n: 4, type: depthwise, in1: "3.2", Rx: 3, Ry: 3, S: 1, Px: 1, Py: 1}
  - {n: 5, type: concat, in1: "3.1", in2: 4}
  - {n: 6, type: shuffle, in1: 5, G: 2}
  - {n: 7, type: eltwise, in1: 6, in2: 2}
  - {n: 8, type: maxpool, in1: 7, Rx: 2, Ry: 2, S: 2, Px: 0, Py: 0}
  - {n: 9, type: avgpool, in1: 8, Rx: 2, Ry: 1, S: 1, Px: 0, Py: 0}
  - {n: 10, type: fc, in1: 9, F: 5}
"""


def test_valid_table_infers_every_rows_output_shape(tmp_path):
    network = load_table(write_table(tmp_path, ALL_SHAPES_ROWS, x=8, y=6, channels=3))
    # Row 1, standard.md §4: floor((8 + 2 - 3) / 2) + 1 = 4 and floor((6 + 2 - 3) / 2) + 1 = 3;
    # rounding up (ceil mode) would give 5 x 4. Row 8: floor((3 - 2) / 2) + 1 = 1.
    assert [layer.out_shapes for layer in network.layers] == [
        ((4, 3, 4),),
        ((4, 3, 4),),
        ((4, 3, 1), (4, 3, 3)),
        ((4, 3, 3),),
        ((4, 3, 4),),
        ((4, 3, 4),),
        ((4, 3, 4),),
        ((2, 1, 4),),
        ((1, 1, 4),),
        ((1, 1, 5),),
    ]
    assert network.input_shape == (8, 6, 3)
    assert network.output_shape == (1, 1, 5)


def test_valid_table_gives_each_row_the_shapes_of_the_maps_it_names(tmp_path):
    network = load_table(write_table(tmp_path, ALL_SHAPES_ROWS, x=8, y=6, channels=3))
    rows = {layer.number: layer for layer in network.layers}
    assert rows[1].in_shapes == ((8, 6, 3),)
    assert rows[4].in_shapes == ((4, 3, 3),)
    assert rows[5].in_shapes == ((4, 3, 1), (4, 3, 3))
    assert rows[7].in_shapes == ((4, 3, 4), (4, 3, 4))
    assert rows[10].weight_shapes == {"weights": (5, 4, 1, 1), "biases": (5,)}


def test_rows_may_be_listed_out_of_order(tmp_path):
    rows = f"""\
  - {{n: 2, type: relu, in1: 1}}
  - {{n: 1, type: conv, F: 4, {CONV_3X3}}}
"""
    network = load_table(write_table(tmp_path, rows))
    assert [layer.type.name for layer in network.layers] == ["conv", "relu"]


def test_user_directory_of_tables_loads_in_the_standards_order(tmp_path):
    write_table(tmp_path, ONE_ROW, file="a.yaml", letter="Ш")
    write_table(tmp_path, ONE_ROW, file="b.yaml", letter="Р")
    networks = load_networks(tmp_path)
    assert list(networks) == ["R", "Sh"]
    assert networks["Sh"].source == str(tmp_path / "a.yaml")


def test_network_is_found_by_letter_in_a_user_directory(tmp_path):
    write_table(tmp_path, ONE_ROW, file="resnet.yaml", letter="Р")
    assert load_network("Р", tmp_path).source == str(tmp_path / "resnet.yaml")


def test_two_tables_with_the_same_letter_are_rejected(tmp_path):
    first = write_table(tmp_path, ONE_ROW, file="a.yaml", letter="Р")
    second = write_table(tmp_path, ONE_ROW, file="b.yaml", letter="Р")
    with pytest.raises(TableError) as excinfo:
        load_networks(tmp_path)
    message = str(excinfo.value)
    assert message.startswith(f"{second}: network Р is already defined in {first}")


@pytest.mark.parametrize(
    ("key", "latin"),
    [
        ("R", "R"),
        ("r", "R"),
        ("Sh", "Sh"),
        ("sh", "Sh"),
        ("SH", "Sh"),
        ("S", "S"),
        ("Р", "R"),
        ("р", "R"),
        ("Ш", "Sh"),
        ("М", "M"),
    ],
)
def test_network_key_accepts_latin_and_cyrillic_letters(key, latin):
    assert network_key(key) == latin


@pytest.mark.parametrize("key", ["X", "Shh", "Ж", ""])
def test_unknown_network_key_is_rejected_with_the_list_of_networks(key):
    with pytest.raises(KeyError) as excinfo:
        network_key(key)
    message = excinfo.value.args[0]
    assert f"unknown network {key!r}" in message
    assert "M (М), G (Г), V (В), S (С), R (Р), Sh (Ш)" in message


def test_a_parameter_name_that_is_not_text_is_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "letter: М\nname: t\nprovenance: official\ninput: {X: 4, Y: 4, L: 2}\n"
        "layers:\n  - {n: 1, type: shuffle, G: 2, 3: 4}\n",
        encoding="utf-8",
    )
    with pytest.raises(TableError, match=r"bad\.yaml: row 1: parameter name\(s\) 3 must be text"):
        load_table(path)


# --- files that are not a table, and how tables and networks are named ---------------


@pytest.mark.parametrize("letter", ["[1]", "{Р: 1}", "5"], ids=["list", "mapping", "number"])
def test_letter_that_is_not_text_is_rejected(tmp_path, letter):
    path = write_table(tmp_path, ONE_ROW)
    path.write_text(
        path.read_text(encoding="utf-8").replace("letter: Р", f"letter: {letter}"),
        encoding="utf-8",
    )
    message = rejection(path)
    assert message.startswith(f"{path}: letter ")
    assert "is not one of the standard's networks" in message


def test_table_that_is_not_utf8_is_rejected(tmp_path):
    path = write_table(tmp_path, ONE_ROW)
    # The header's Cyrillic letter saved in Windows-1251 instead of UTF-8.
    path.write_bytes(path.read_text(encoding="utf-8").encode("cp1251"))
    message = rejection(path)
    assert message.startswith(f"{path}: not UTF-8 text")


def test_outputs_are_named_as_table_rows_name_them(tmp_path):
    network = load_table(write_table(tmp_path, ALL_SHAPES_ROWS, x=8, y=6, channels=3))
    relu, split = network.layers[1], network.layers[2]
    assert relu.output_name(0) == "2"
    assert [split.output_name(i) for i in (0, 1)] == ["3.1", "3.2"]


def test_yml_tables_in_a_directory_are_loaded(tmp_path):
    write_table(tmp_path, ONE_ROW, file="a.yml", letter="Ш")
    write_table(tmp_path, ONE_ROW, file="b.yaml", letter="Р")
    write_table(tmp_path, ONE_ROW, file="c.YAML", letter="М")  # the suffix in any case
    write_table(tmp_path, "not a table", file="notes.txt", letter="Г")
    networks = load_networks(tmp_path)
    assert list(networks) == ["M", "R", "Sh"]
    assert networks["Sh"].source == str(tmp_path / "a.yml")


def test_unknown_network_key_is_also_a_table_error():
    with pytest.raises(UnknownNetworkError) as excinfo:
        network_key("X")
    assert isinstance(excinfo.value, TableError)
    # Printed as written: a plain KeyError would quote the whole message.
    assert str(excinfo.value).startswith("unknown network 'X';")


def test_command_line_reports_an_unknown_network_and_exits_2(capsys):
    assert main(["reference", "--networks", "X"]) == 2
    assert capsys.readouterr().err.startswith("error: --networks: unknown network 'X'; known: M")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--networks", ","], "argument --networks: ,: names no network"),
        (["--seed", "-1"], "argument --seed: -1: must be an integer from 0 to"),
        (["--seed", "1_0"], "argument --seed: 1_0: not an integer"),
        (["--batch", "2000"], "argument --batch: 2000: must be an integer from 1 to 1024"),
    ],
)
def test_command_line_checks_its_options_as_the_plugin_does(capsys, args, says):
    try:
        code = main(["reference", *args])
    except SystemExit as exit:  # argparse's own usage error
        code = exit.code
    assert code == 2
    assert says in capsys.readouterr().err


def test_command_line_names_the_row_past_float16_by_its_number(tmp_path, capsys):
    # Rows numbered 10 to 40: the first past 65504 is named by its number, then placed. Each
    # 3x3 convolution over 64 channels multiplies the values' spread by about 14.
    rows = f"""\
  - {{n: 10, type: conv, F: 64, {CONV_3X3}}}
  - {{n: 20, type: conv, in1: 10, F: 64, {CONV_3X3}}}
  - {{n: 30, type: conv, in1: 20, F: 64, {CONV_3X3}}}
  - {{n: 40, type: maxpool, in1: 30, Rx: 2, Ry: 2, S: 2, Px: 0, Py: 0}}
"""
    write_table(tmp_path, rows, letter="Р", channels=64)
    args = ["reference", "--tables", str(tmp_path), "--batch", "1", "--weights", "full-range"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.endswith("first row past float16's 65504: row 30 (layer 3 of 4)\n"), out


def test_command_line_on_a_network_without_weights_says_its_largest_gradient_is_0(tmp_path, capsys):
    rows = "  - {n: 1, type: maxpool, Rx: 2, Ry: 2, S: 2, Px: 0, Py: 0}\n"
    write_table(tmp_path, rows, letter="Р")
    assert main(["reference", "--tables", str(tmp_path), "--batch", "1"]) == 0
    assert "largest gradient 0;" in capsys.readouterr().out


def test_command_line_says_when_the_reference_does_not_fit_in_memory(monkeypatch, capsys):
    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("pytest_gostcnn.reference.iteration.executor.train_in_slices", no_memory)
    assert main(["reference", "--networks", "Sh", "--batch", "1024"]) == 1
    assert capsys.readouterr().err == (
        "error: Ш (Sh) at B=1024 does not fit in this host's memory as float64; try a smaller "
        "--reference-memory\n"
    )


def test_command_line_refuses_a_memory_bound_too_small_for_one_image_in_one_line(capsys):
    args = ["reference", "--networks", "Sh", "--batch", "1024", "--reference-memory", "10MB"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: --reference-memory: a memory bound of 10MB is too small for ")
    assert "one image of Sh at B=1024: the smallest that works is " in err


def test_command_line_selects_networks_by_name_as_the_plugin_does(capsys):
    args = ["reference", "--networks", "Shuffle", "--batch", "1", "--weights", "full-range"]
    assert main(args) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("Ш (Sh): one float64 training iteration at B=1, full-range weights")
    # The value ranges docs/standard.md §6 quotes: the first row past 65504 and so on.
    assert re.search(
        r"largest gradient [0-9.e+]+; first row past float16's 65504: row \d+ \(layer \d+ of 61\)$",
        line,
    )


def test_command_line_under_the_scaled_draw_keeps_every_forward_value_within_float16(capsys):
    assert main(["reference", "--networks", "Sh", "--batch", "2"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert ", scaled weights, " in line
    assert line.endswith("first row past float16's 65504: none")


def test_command_line_reports_a_network_missing_from_the_directory_and_exits_2(tmp_path, capsys):
    write_table(tmp_path, ONE_ROW, letter="Р")
    assert main(["reference", "--tables", str(tmp_path), "--networks", "Sh"]) == 2
    assert capsys.readouterr().err == "error: --networks: network Sh (Ш) has no table in --tables\n"


@pytest.mark.parametrize("name", TABLE_SETS)
def test_the_shipped_sets_read_by_libyaml_are_what_the_strict_loader_reads(name):
    # libyaml's parser (the shipped sets' fast path) keeps a key given twice and expands
    # aliases; the strict loader refuses both, so every shipped table must read the same.
    paths = [p for p in table_set_dir(name).iterdir() if p.suffix.lower() in TABLE_SUFFIXES]
    strict = {network.latin: network for network in map(load_table, paths)}
    assert load_networks(name) == strict
    assert len(strict) == 6
