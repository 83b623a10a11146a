"""ci/device_tree_size.py: a tar of the paths counts their bytes plus tar's headers and padding, the way `tar -c`
writes them."""


def test_tar_counts_content_and_headers(ci_tool, tmp_path, monkeypatch):
    tool = ci_tool("device_tree_size")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.bin").write_bytes(b"x" * 1_000_000)
    (tmp_path / "d" / "b.txt").write_text("y" * 10)
    mib = tool.tar_mib(["d"])
    # content 1 000 010 bytes; a 512-byte header per entry (folder + two files), content padded to 512, 10 KiB blocking
    assert 1_000_010 / 2**20 < mib < (1_000_010 + 3 * 512 + 2 * 512 + 10240) / 2**20
    assert tool.tar_mib(["d/b.txt"]) < 0.02
