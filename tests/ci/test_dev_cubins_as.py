"""ci/dev_cubins_as.py: dev cubins copied under other suffixes, index records with them (entry symbol unchanged), the
longest suffix matched first, bad map items named."""
import json

import pytest


def _dev_dir(path, names):
    path.mkdir()
    for n in names:
        (path / f"{n}.cubin").write_bytes(n.encode())
        (path / f"{n}.ptx").write_text("ptx")
    (path / "index.json").write_text(json.dumps({n: {"entry": f"{n}_0", "bm": 64} for n in names}))
    return path


def test_copies_under_new_names_longest_suffix_first(ci_tool, tmp_path):
    tool = ci_tool("dev_cubins_as")
    src = _dev_dir(tmp_path / "src", ["role2_w1_glm52_bm64_ppksaf", "role2_w1_glm52_bm64_ppksafw",
                                      "role2_w1_glm52_bm64_pp2ksa"])
    dst = tmp_path / "dst"
    done = tool.copy_as(src, dst, tool.parse_map("_ppksaf=_ppksa,_ppksafw=_ppksaw"))
    assert sorted(done) == ["role2_w1_glm52_bm64_ppksa", "role2_w1_glm52_bm64_ppksaw"]
    assert (dst / "role2_w1_glm52_bm64_ppksaw.cubin").read_bytes() == b"role2_w1_glm52_bm64_ppksafw"
    assert (dst / "role2_w1_glm52_bm64_ppksa.cubin").read_bytes() == b"role2_w1_glm52_bm64_ppksaf"
    idx = json.loads((dst / "index.json").read_text())
    assert idx["role2_w1_glm52_bm64_ppksaw"]["entry"] == "role2_w1_glm52_bm64_ppksafw_0"
    assert idx["role2_w1_glm52_bm64_ppksaw"]["copied_from"] == "role2_w1_glm52_bm64_ppksafw"
    assert not list(dst.glob("*.ptx"))  # the device tree has a size limit
    # a second copy into the same folder merges with its index
    tool.copy_as(src, dst, tool.parse_map("_pp2ksa=_pp2ksa"))
    assert len(json.loads((dst / "index.json").read_text())) == 3


def test_bad_map_and_no_match(ci_tool, tmp_path, capsys):
    tool = ci_tool("dev_cubins_as")
    with pytest.raises(SystemExit, match="bad map item 'ppksaf=_ppksa'"):
        tool.parse_map("ppksaf=_ppksa")
    with pytest.raises(SystemExit, match="bad map item '_ppksaf'"):
        tool.parse_map("_ppksaf")
    src = _dev_dir(tmp_path / "src", ["role2_w1_glm52_bm8_pp2ksa"])
    assert tool.main([str(src), str(tmp_path / "dst"), "_ppksaf=_ppksa"]) == 1
    assert "nothing in" in capsys.readouterr().err
