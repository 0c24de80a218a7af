"""The gate on real .tar.gz archives (as SageMaker receives them) and across co-hosted adapters."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from cdk_adapters.artifacts.packaging import package_adapter
from cdk_adapters.gate import (
    Acknowledgment,
    AdapterContents,
    AdapterFacts,
    CoHostedAdapter,
    Reference,
    check_adapter_archive,
    check_adapter_facts,
    check_co_hosted,
    covering_max_lora_rank,
    split_acknowledged,
)


def tar_of(path: Path, files: dict[str, bytes], *, symlink: tuple[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo(symlink[0])
            info.type = tarfile.SYMTYPE
            info.linkname = symlink[1]
            tar.addfile(info)
    return path


def adapter_files(adapter: Path) -> dict[str, bytes]:
    return {name: (adapter / name).read_bytes() for name in ("adapter_config.json", "adapter_model.safetensors")}


def test_packaged_archive_passes(zoo, tmp_path):
    archive = package_adapter(zoo.adapter("good"), tmp_path / "a.tar.gz").path
    assert check_adapter_archive("tenant-v1", archive, Reference(zoo.base_facts, 16)) == []


def test_nested_directory_in_archive(zoo, tmp_path):
    files = {f"adapter/{name}": data for name, data in adapter_files(zoo.adapter("good")).items()}
    archive = tar_of(tmp_path / "nested.tar.gz", files)
    problems = check_adapter_archive("tenant-v1", archive, Reference(zoo.base_facts, 16))
    assert len(problems) == 1, problems
    assert problems[0].subject == "adapter 'tenant-v1'" and problems[0].field == "source"
    assert "the archive nests the adapter under 'adapter/'" in problems[0].message
    assert "cdk-adapters package adapter -o adapter.tar.gz" in problems[0].message


def test_links_and_escaping_paths_in_archive(zoo, tmp_path):
    files = adapter_files(zoo.adapter("good"))
    files["../outside.txt"] = b"x"
    archive = tar_of(tmp_path / "evil.tar.gz", files, symlink=("tokenizer.json", "/etc/passwd"))
    messages = [p.message for p in check_adapter_archive("tenant-v1", archive, Reference(zoo.base_facts, 16))]
    assert "archive member '../outside.txt' is a path outside the archive" in messages[0]
    assert "archive member 'tokenizer.json' is a symbolic link to '/etc/passwd'" in messages[1]


def test_archive_far_larger_than_its_lora(zoo, tmp_path):
    files = adapter_files(zoo.adapter("good"))
    files["optimizer.pt"] = os.urandom(2_000_000)  # incompressible, as optimizer state is
    archive = tar_of(tmp_path / "big.tar.gz", files)
    problems = check_adapter_archive("tenant-v1", archive, Reference(zoo.base_facts, 16))
    assert [p.field for p in problems] == ["source"]
    assert "a LoRA of these shapes (rank 8)" in problems[0].message
    assert f"the archive is {archive.stat().st_size} bytes" in problems[0].message


def test_archive_that_is_not_gzip(tmp_path, zoo):
    bogus = tmp_path / "a.tar.gz"
    bogus.write_bytes(b"not an archive")
    problems = check_adapter_archive("tenant-v1", bogus, Reference(zoo.base_facts, 16))
    assert problems[0].field == "adapter_config.json"
    assert "cannot be read as a .tar.gz archive" in problems[0].message


def test_facts_checks_run_on_lock_facts_alone(zoo):
    facts = AdapterFacts.from_contents(AdapterContents.from_dir(zoo.adapter("dora")))
    problems = check_adapter_facts("tenant-v1", facts, Reference(zoo.base_facts, 16))
    assert [p.field for p in problems] == ["use_dora"]


def test_covering_rank_is_the_smallest_allowed(zoo):
    facts = [AdapterFacts.from_contents(AdapterContents.from_dir(zoo.adapter(k))) for k in ("good", "rank-pattern-32")]
    assert [f.max_rank for f in facts] == [8, 32]
    assert covering_max_lora_rank(facts) == 32
    assert covering_max_lora_rank(facts[:1]) == 8


def test_co_hosted_target_modules_must_match():
    problems = check_co_hosted(
        [
            CoHostedAdapter("a-v1", ("k_proj", "o_proj", "q_proj", "v_proj")),
            CoHostedAdapter("b-v1", ("k_proj", "o_proj", "q_proj", "v_proj")),
            CoHostedAdapter("c-v1", ("q_proj", "v_proj")),
        ]
    )
    assert len(problems) == 1
    assert (problems[0].subject, problems[0].field) == ("adapter 'c-v1'", "target_modules")
    assert "co-hosted adapter(s) a-v1, b-v1 target k_proj, o_proj, q_proj, v_proj (lacks k_proj, o_proj)" in problems[0].message
    assert "acknowledge: {rule: identical-target-modules" in problems[0].message
    assert problems[0].rule == "identical-target-modules"
    assert str(problems[0]).endswith("[identical-target-modules]")


def test_an_acknowledging_adapter_is_left_out_of_the_majority_and_its_finding_is_kept_apart():
    # b-v1 is listed first and would otherwise be the tie-break reference that c-v1 differs from.
    adapters = [
        CoHostedAdapter("b-v1", ("gate_proj", "up_proj"), acknowledged=frozenset({"identical-target-modules"})),
        CoHostedAdapter("a-v1", ("q_proj", "v_proj")),
    ]
    problems = check_co_hosted(adapters)
    assert [(p.subject, p.rule) for p in problems] == [("adapter 'b-v1'", "identical-target-modules")]
    reason = "MLP-only adapter for style, latency measured equal"
    open_problems, acknowledged = split_acknowledged(
        problems, {"adapter 'b-v1'": Acknowledgment("identical-target-modules", reason)}
    )
    assert open_problems == [] and [(f.problem, f.reason) for f in acknowledged] == [(problems[0], reason)]
    assert str(acknowledged[0]).endswith(f"[identical-target-modules] (acknowledged: {reason})")


def test_an_acknowledgment_covers_only_the_rule_it_names():
    problems = check_co_hosted([CoHostedAdapter("style", ("q_proj",)), CoHostedAdapter("peer-v1", ("q_proj",))])
    open_problems, acknowledged = split_acknowledged(
        problems, {"adapter 'style'": Acknowledgment("identical-target-modules", "a reason that is long enough")}
    )
    assert [p.rule for p in open_problems] == ["version-suffix"] and acknowledged == []


def test_names_need_a_version_suffix_and_must_be_unique():
    problems = check_co_hosted(
        [CoHostedAdapter("support-triage", ()), CoHostedAdapter("billing-v2", ()), CoHostedAdapter("billing-v2", ())]
    )
    assert [(p.subject, p.field) for p in problems] == [("adapter 'billing-v2'", "name"), ("adapter 'support-triage'", "name")]
    assert "is listed 2 times" in problems[0].message
    assert "must end with a version suffix -v<N> (for example 'support-triage-v1')" in problems[1].message
    assert [p.rule for p in problems] == ["unique-names", "version-suffix"]


def test_names_that_differ_only_in_case_are_one_name():
    problems = check_co_hosted([CoHostedAdapter("SupportEN-v1", ()), CoHostedAdapter("supporten-v1", ())])
    assert [(p.subject, p.field, p.rule) for p in problems] == [("adapter 'SupportEN-v1'", "name", "unique-names")]
    assert "'SupportEN-v1', 'supporten-v1'" in problems[0].message and "ignoring case" in problems[0].message


def test_the_version_suffix_compares_ignoring_case_and_its_advice_names_a_free_name():
    assert check_co_hosted([CoHostedAdapter("Support-V2", ())]) == [], "-V2 is -v2 to SageMaker"
    problems = check_co_hosted(
        [
            CoHostedAdapter("support-v1", ()),
            CoHostedAdapter("Support-V2", ()),
            CoHostedAdapter("SUPPORT", ()),
            CoHostedAdapter("billing-v", ()),
        ]
    )
    messages = {p.subject: p.message for p in problems}
    assert [p.rule for p in problems] == ["version-suffix", "version-suffix"]
    assert "(for example 'SUPPORT-v3')" in messages["adapter 'SUPPORT'"]  # v1 and v2 are taken, whatever their case
    assert "(for example 'billing-v1')" in messages["adapter 'billing-v'"]


def _archive_with_hidden_tail(path: Path, adapter: Path, tail_bytes: int) -> Path:
    """The adapter's files as a tar, with `tail_bytes` of random data after the tar's end marker
    (readers stop at the marker, so the adapter looks whole), gzipped: bytes it smuggles along."""
    import gzip

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in adapter_files(adapter).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(raw.getvalue() + os.urandom(tail_bytes), compresslevel=1))
    return path


def test_an_archive_larger_than_its_lora_shapes_allow_is_refused_just_past_the_bound(zoo, tmp_path):
    """The allowance is a quarter over what the LoRA's shapes need, plus 64 KiB: an archive 1.3 times
    the allowance is refused, one at 0.9 times passes (the message says what the shapes need)."""
    import re

    from cdk_adapters.gate.checks.size_bound import ARCHIVE_SLACK_BYTES, ARCHIVE_SLACK_RATIO

    reference = Reference(zoo.base_facts, 16)
    far = check_adapter_archive(
        "tenant-v1", _archive_with_hidden_tail(tmp_path / "far.tar.gz", zoo.adapter("good"), 4_000_000), reference
    )
    [problem] = [p for p in far if p.rule == "size-bound"]
    needed = int(re.search(r"needs at most about (\d+)", problem.message).group(1))
    allowance = int(needed * ARCHIVE_SLACK_RATIO) + ARCHIVE_SLACK_BYTES
    for ratio, refused in ((1.3, True), (0.9, False)):
        archive = _archive_with_hidden_tail(tmp_path / f"tail-{ratio}.tar.gz", zoo.adapter("good"), 0)
        archive = _archive_with_hidden_tail(archive, zoo.adapter("good"), max(0, int(allowance * ratio) - archive.stat().st_size))
        problems = [p for p in check_adapter_archive("tenant-v1", archive, reference) if p.rule == "size-bound"]
        assert bool(problems) is refused, (ratio, archive.stat().st_size, allowance)
