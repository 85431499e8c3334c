"""Report file names come from building ids safely: bounded, no path, unique."""

from __future__ import annotations

import pytest

from tasks.outputs.report import MAX_FILE_STEM, plot_file_name


def test_a_plain_id_is_its_own_file_name():
    assert plot_file_name("UCam_Building_b7", set()) == "UCam_Building_b7.png"


@pytest.mark.parametrize("building_id", ["../../x", "a/b", "/etc/passwd", ".hidden", "..",
                                         "B" * 255, "x" * 10_000, "ÜML id", "con:1", ""])
def test_no_id_escapes_the_folder_or_the_length_limit(building_id):
    name = plot_file_name(building_id, set())
    assert "/" not in name and "\\" not in name and not name.startswith(".")
    assert len(name.encode()) <= MAX_FILE_STEM + 20 and name.endswith(".png")


def test_ids_that_clean_to_the_same_name_get_different_files():
    taken: set[str] = set()
    names = [plot_file_name(i, taken) for i in ("a/b", "a_b", "a:b", "A_B", "a" * 300, "a" * 301)]
    assert len({n.lower() for n in names}) == len(names)
