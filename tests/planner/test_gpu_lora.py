"""The planner's GPU LoRA model: pinned to the measured kernel table, the LRU replay checked against an
exact computation on small mixes, and the recommendation on the tutorial's twelve tenants (one tier)
and on ten rank-16 tenants plus one rank-64 tenant (split)."""

from __future__ import annotations

import pytest

from cdk_adapters.planner import lora_kernels, swaps
from cdk_adapters.planner.gpu_lora import TenantLora, plan_gpu_lora
from tests.planner.cli_run import plan

# --- the kernel table -------------------------------------------------------------------------


@pytest.mark.parametrize(("tokens", "distinct"), list(lora_kernels.ALL_LINEAR_RANK16))
def test_a_figure_at_the_rank16_tables_own_points_is_the_table(tokens, distinct):
    base, total = lora_kernels.ALL_LINEAR_RANK16[tokens, distinct]
    cost = lora_kernels.step_cost(16, tokens, distinct)
    assert (cost.base_us, cost.lora_us) == (base, pytest.approx(total - base))
    assert cost.basis == "measured on H200"


@pytest.mark.parametrize(
    ("tokens", "distinct", "rank"), [(t, d, r) for (t, d), row in lora_kernels.PADDED_RANK.items() for r in row if r != 16]
)
def test_a_figure_at_the_padded_rank_tables_own_points_is_the_table(tokens, distinct, rank):
    cost = lora_kernels.step_cost(rank, tokens, distinct)
    assert cost.lora_us == lora_kernels.PADDED_RANK[tokens, distinct][rank]
    assert cost.basis == "measured on H200"


def test_the_two_tables_agree_at_rank_16_to_their_rounding():
    """Rank 16 comes from the first table; the padded table's rank-16 column (other runs) agrees within 0.5 µs."""
    for (tokens, distinct), row in lora_kernels.PADDED_RANK.items():
        assert abs(lora_kernels.step_cost(16, tokens, distinct).lora_us - row[16]) <= 0.5


def test_between_the_points_a_figure_is_interpolated_and_says_so():
    between = lora_kernels.step_cost(16, 16, 4)
    low, high = lora_kernels.step_cost(16, 8, 4), lora_kernels.step_cost(16, 32, 4)
    assert min(low.lora_us, high.lora_us) <= between.lora_us <= max(low.lora_us, high.lora_us)
    assert between.basis == "interpolated from the H200 measurements"
    assert lora_kernels.step_cost(64, 16, 8).lora_us > lora_kernels.step_cost(16, 16, 8).lora_us  # padding costs
    assert "estimated" in lora_kernels.step_cost(16, 8, 4, gpu_model="L4").basis


def test_an_attention_only_adapter_costs_about_40_percent_of_an_all_linear_one():
    """Measured per module at 1 token: qkv 15.6 + o 9.2 of 62.4 µs."""
    share = lora_kernels.module_share(["q_proj", "k_proj", "v_proj", "o_proj"])
    assert share == pytest.approx((15.6 + 9.2) / 62.4)
    assert lora_kernels.module_share(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    ) == pytest.approx(1.0)


# --- the LRU replay against an exact computation --------------------------------------------


def exact_miss_rates(rates: dict[str, float], gpu_slots: int, host_slots: int) -> tuple[float, float]:
    """Stationary (GPU, host) miss probabilities of independent requests under two LRU caches, by
    enumerating every reachable cache state and iterating the Markov chain to convergence."""
    total = sum(rates.values())
    probability = {name: rate / total for name, rate in rates.items()}

    def step(state, name):
        gpu, host = state
        host_miss = name not in host
        host = tuple([n for n in host if n != name] + [name])[-host_slots:]
        gpu_miss = name not in gpu
        gpu = tuple([n for n in gpu if n != name] + [name])[-gpu_slots:]
        return (gpu, host), gpu_miss, host_miss

    start = ((), ())
    states, frontier = {start}, [start]
    while frontier:
        state = frontier.pop()
        for name in probability:
            following, _, _ = step(state, name)
            if following not in states:
                states.add(following)
                frontier.append(following)
    weights = {state: 1.0 / len(states) for state in states}
    for _ in range(2000):
        following = dict.fromkeys(states, 0.0)
        for state, weight in weights.items():
            for name, p in probability.items():
                following[step(state, name)[0]] += weight * p
        weights = following
    gpu_miss = sum(weights[s] * p for s in states for name, p in probability.items() if step(s, name)[1])
    host_miss = sum(weights[s] * p for s in states for name, p in probability.items() if step(s, name)[2])
    return gpu_miss, host_miss


@pytest.mark.parametrize(
    ("rates", "gpu_slots", "host_slots"),
    [
        ({"a": 1, "b": 1, "c": 1}, 1, 2),
        ({"a": 6, "b": 3, "c": 1}, 1, 2),
        ({"a": 5, "b": 2, "c": 2, "d": 1}, 2, 3),
        ({"a": 8, "b": 1, "c": 1, "d": 1, "e": 1}, 2, 2),
    ],
)
def test_the_replay_matches_the_exact_miss_rates_of_small_mixes(rates, gpu_slots, host_slots):
    estimate = swaps.replay(rates, gpu_slots=gpu_slots, host_slots=host_slots, requests=200_000, seed=1)
    gpu_miss, host_miss = exact_miss_rates(rates, gpu_slots, host_slots)
    assert estimate.gpu_miss_rate == pytest.approx(gpu_miss, abs=0.006)
    assert estimate.host_miss_rate == pytest.approx(host_miss, abs=0.006)


def test_the_exact_computation_knows_the_textbook_case():
    """Uniform requests over n adapters and k slots: LRU misses 1 - k/n of them."""
    gpu_miss, _ = exact_miss_rates(dict.fromkeys("abcde", 1.0), 2, 5)
    assert gpu_miss == pytest.approx(1 - 2 / 5, abs=1e-9)


def test_every_adapter_in_its_slot_never_swaps_after_the_first_requests():
    estimate = swaps.replay({"a": 1, "b": 2}, gpu_slots=2, host_slots=2, requests=1000)
    assert (estimate.gpu_misses, estimate.host_misses) == (2, 2)


def test_a_zipf_mix_is_skewed_and_keeps_the_total():
    rates = swaps.zipf_rates(4, 1.0, 100.0)
    assert sum(rates.values()) == pytest.approx(100.0)
    assert rates["tenant-1"] == pytest.approx(2 * rates["tenant-2"]) == pytest.approx(4 * rates["tenant-4"])


# --- the recommendation ---------------------------------------------------------------------


def test_the_tutorials_twelve_rank16_tenants_are_one_tier():
    tenants = [TenantLora(f"tenant-{i}", 16, 8.0) for i in range(12)]
    result = plan_gpu_lora(tenants, gpu_model="L4", max_loras=4, max_cpu_loras=12, base_weight_gib=15.0)
    assert result.split is None and result.max_lora_rank == 16
    assert result.recommendation().startswith("one tier")
    # 12 equally busy tenants in 4 slots: LRU swaps 1 - 4/12 of the requests in.
    assert result.swap.gpu_miss_rate == pytest.approx(1 - 4 / 12, abs=0.01)


def test_ten_rank16_tenants_and_one_rank64_tenant_are_split_with_the_trade_off_in_numbers():
    tenants = [TenantLora(f"tenant-{i}", 16, 8.0) for i in range(10)] + [TenantLora("large-v1", 64, 8.0)]
    result = plan_gpu_lora(tenants, gpu_model="H200", max_loras=4, max_cpu_loras=11, base_weight_gib=15.0)
    assert result.max_lora_rank == 64
    split = result.split
    assert split is not None and (split.small_rank, split.large_rank) == (16, 64)
    assert split.large_tenants == ("large-v1",) and len(split.small_tenants) == 10
    # At 8 tokens / 4 adapters and 32 / 4 the padded table's rank-64 factor is 1.6-1.8: the small tenants gain that.
    assert 1.5 <= split.speedup <= 1.9
    assert split.extra_base_copy_gib == 15.0
    assert "split by rank" in result.recommendation() and "15.0 GiB" in result.recommendation()


def test_the_plan_command_shows_the_split_and_its_basis():
    document = plan("--num-layers", "32", "--tenants", "11", "--ranks", "16x10,64", "--json").json()
    gpu = document["gpu_lora"]
    assert gpu["max_lora_rank"] == 64 and gpu["split"]["small_rank"] == 16
    # One more copy on the example's one-GPU ml.g6.2xlarge: an instance's month at the shipped $1.20/hour.
    assert gpu["split"]["extra_copy_monthly_usd"] == pytest.approx(1.20 * 730)
    assert "serving.tiers: [{max_lora_rank: 16}, {max_lora_rank: 64}]" in gpu["recommendation"]
    assert gpu["source"] == lora_kernels.SOURCE
    assert all("estimated" in row["basis"] for row in gpu["per_decoder_layer"])  # the default instance's L4, not an H200
    assert document["memory"]["max_lora_rank"] == 64  # the slots are sized for the rank-64 tenant too
    one_tier = plan("--num-layers", "32", "--tenants", "12", "--json").json()["gpu_lora"]
    assert one_tier["split"] is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tenants", "3", "--ranks", "16x2"], "--ranks: gives 2 rank(s) for --tenants 3"),
        (["--tenants", "2", "--ranks", "16,1024"], "--ranks: ranks must be from 1 to 512"),
        (["--tenants", "2", "--ranks", "sixteen"], "--ranks: must be RANK[xCOUNT],..."),
        (["--tenants", "2", "--zipf", "-1"], "--zipf: must be from 0 to 10"),
        (["--tenants", "2", "--zipf", "nan"], "--zipf: must be a finite number"),
        (["--ranks", "16"], "--ranks: sets the what-if tenants' ranks: use it with --tenants"),
    ],
)
def test_bad_what_if_lora_flags_are_one_line_each(flags, message):
    result = plan("--num-layers", "32", *flags)
    assert result.status == 1 and message in result.err and "Traceback" not in result.err


def test_a_zipf_what_if_swaps_less_than_an_even_one():
    even = plan("--num-layers", "32", "--tenants", "20", "--json").json()["gpu_lora"]["swaps"]
    skewed = plan("--num-layers", "32", "--tenants", "20", "--zipf", "1.2", "--json").json()["gpu_lora"]["swaps"]
    assert skewed["gpu_miss_rate"] < even["gpu_miss_rate"]
