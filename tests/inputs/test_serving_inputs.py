"""Serving inputs: the MIG price rule, server options, latency tables, arrivals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpucast.catalog import load_catalog
from gpucast.domain.catalog import MigProfile
from gpucast.domain.errors import DataFormatError, InvalidSpecError
from gpucast.inputs import serving as inputs
from gpucast.store.datasets.azure_functions import read_invocation_counts


def test_a_mig_slice_costs_its_share_of_the_gpu_it_sits_on() -> None:
    two_per_gpu = MigProfile(name="3g.20gb", compute_slices=3, memory_gib=20, max_instances=2)
    assert inputs.mig_price_usd_per_hour(2.0, two_per_gpu) == pytest.approx(1.0)
    seven = MigProfile(name="1g.5gb", compute_slices=1, memory_gib=5, max_instances=7)
    assert inputs.mig_price_usd_per_hour(7.0, seven) == pytest.approx(1.0)


def test_plan_options_and_the_simulated_server_use_the_same_slice_price() -> None:
    catalog = load_catalog()
    options, targets = inputs.build_server_options(gpus=["A100-40GB"], catalog=catalog)
    whole = next(o for o in options if o.name == "A100-40GB")
    for option in options:
        if option.kind != "mig":
            continue
        spec, prof, _offer = targets[option.name]
        assert spec is not None and prof is not None
        assert option.per_unit == prof.max_instances
        assert option.price_usd_per_hour * prof.max_instances == pytest.approx(
            whole.price_usd_per_hour
        )
        server = inputs.gpu_server(catalog, "A100-40GB", prof.name, None)
        assert server.price.value == pytest.approx(option.price_usd_per_hour)
        assert server.name == option.name and server.kind == "mig"
    given = inputs.gpu_server(catalog, "A100-40GB", "3g.20gb", 3.0)
    assert given.price.value == pytest.approx(1.5)
    assert "over the 2 3g.20gb slices" in given.price.source


def test_server_option_filters() -> None:
    options, _ = inputs.build_server_options(gpus=["T4"], no_mig=True)
    assert [o.name for o in options] == ["T4"]
    with pytest.raises(InvalidSpecError, match="mig: must be GPU:PROFILE"):
        inputs.build_server_options(migs=["1g.5gb"])
    with pytest.raises(InvalidSpecError, match="mig: T4 does not support MIG"):
        inputs.build_server_options(migs=["T4:1g.5gb"])
    with pytest.raises(InvalidSpecError, match="does not exist on A100-40GB"):
        inputs.build_server_options(migs=["A100-40GB:1g.23gb"])
    with pytest.raises(InvalidSpecError, match="no published MIG placements for B200"):
        inputs.gpu_server(load_catalog(), "B200", "1g.23gb", None)  # as catalog mig refuses


def test_latency_tables(tmp_path: Path) -> None:
    path = tmp_path / "t4.csv"
    path.write_text("batch_size,latency_s\n4,0.02\n1,0.01\n")
    curve = inputs.read_latency_table(path)
    assert curve.batch_sizes == (1, 4) and curve.latency_s == (0.01, 0.02)
    tables = inputs.read_latency_tables([f"mlp@T4={path}"])
    assert tables[("mlp", "T4")] == curve
    with pytest.raises(InvalidSpecError, match="MODEL@SERVER=CSV"):
        inputs.read_latency_tables([str(path)])
    path.write_text("batch_size,latency_s\n1,-3\n")
    with pytest.raises(DataFormatError, match="line 2"):
        inputs.read_latency_table(path)
    path.write_text("b,t\n1,2\n")
    with pytest.raises(DataFormatError, match="batch_size and latency_s"):
        inputs.read_latency_table(path)


def test_arrival_kinds() -> None:
    poisson = inputs.arrivals("poisson", 100.0, 10.0, seed=1)
    assert poisson.source == "Poisson 100 req/s" and poisson.times_s.size == pytest.approx(
        1000, rel=0.15
    )
    same = inputs.arrivals("poisson", 100.0, 10.0, seed=1)
    assert np.array_equal(poisson.times_s, same.times_s)
    constant = inputs.arrivals("constant", 10.0, 1.0, seed=0)
    assert constant.times_s.size == 10
    bursty = inputs.arrivals("bursty", 100.0, 200.0, seed=0)
    assert bursty.source.startswith("bursty MMPP")
    assert bursty.times_s.size / 200.0 == pytest.approx(100.0, rel=0.25)
    with pytest.raises(InvalidSpecError, match="arrivals: must be poisson"):
        inputs.arrivals("zipf", 1.0, 1.0, seed=0)


def test_trace_arrivals_report_skipped_rows(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s\n" + "\n".join(str(i * 0.1) for i in range(50)) + "\nbad\n")
    got = inputs.read_trace_arrivals(trace, seed=0)
    assert got.times_s.size == 50
    assert got.warnings == (f"skipped 1 malformed row(s) of t.csv; first: {_first(got)}",)
    cut = inputs.arrivals(f"trace:{trace}", None, 2.0, seed=0)
    assert cut.times_s.size == 20 and cut.warnings == got.warnings
    assert cut.duration_s == 2.0 and cut.source.startswith("trace t.csv")
    # a rate time-scales the trace (10 req/s -> 1 req/s): 2 s hold 2 requests
    slow = inputs.arrivals(f"trace:{trace}", 1.0, 2.0, seed=0)
    assert slow.times_s.size == 2 and "time-scaled to 1 req/s" in slow.source
    trace.write_text("arrival_s\n1.0\n2.0\n")
    with pytest.raises(DataFormatError, match="too few to have a rate"):
        inputs.read_trace_arrivals(trace, seed=0)


def test_a_cut_trace_names_the_requests_and_rate_it_simulates(tmp_path: Path) -> None:
    # 30 requests in the first 10 s, then 10 over the next 90 s: the whole trace's mean is
    # ~0.4 req/s, the first 10 s offer 3 req/s (issue #13: the footer named the whole file)
    trace = tmp_path / "t.csv"
    times = [i / 3 for i in range(30)] + [10 + 9 * i for i in range(10)]
    trace.write_text("arrival_s\n" + "\n".join(f"{t:g}" for t in times) + "\n")
    cut = inputs.arrivals(f"trace:{trace}", None, 10.0, seed=0)
    assert cut.times_s.size == 30
    assert cut.source.endswith(", first 10 s (30 of 40 requests, 3 req/s offered)")
    # time-scaled to a mean of 4 req/s over the whole trace, the first 10 s offer more
    fast = inputs.arrivals(f"trace:{trace}", 4.0, 3.0, seed=0)
    offered = fast.times_s.size / fast.duration_s
    assert offered > 8.0 and "time-scaled to 4 req/s" in fast.source
    assert f"of 40 requests, {offered:.3g} req/s offered)" in fast.source
    whole = inputs.arrivals(f"trace:{trace}", None, 1000.0, seed=0)
    assert "first" not in whole.source  # nothing cut


def _three_hours(tmp_path: Path) -> Path:
    """30 requests in the first hour, 120 in the second, 30 in the third."""
    times = [*(120 * i for i in range(30)), *(3600 + 30 * i for i in range(120)),
             *(7200 + 120 * i for i in range(30))]  # fmt: skip
    trace = tmp_path / "hours.csv"
    trace.write_text("arrival_s\n" + "\n".join(f"{t:g}" for t in times) + "\n")
    return trace


def test_a_plan_window_replays_the_busiest_hour_and_says_so(tmp_path: Path) -> None:
    from gpucast.domain.llm_serving import parse_token_lengths
    from gpucast.inputs.llm_serving import llm_traffic

    trace = _three_hours(tmp_path)
    busy = inputs.arrivals(f"trace:{trace}", None, None, seed=0, window_s=3600.0)
    assert busy.times_s.size == 120 and busy.times_s[0] == 0.0 and busy.cut
    assert busy.duration_s == 3600.0
    assert ", its busiest hour (1 h in: 120 of 180 requests, 0.0333 req/s offered" in busy.source
    assert "--duration-s D replays the trace's first D s instead" in busy.source
    # --duration-s keeps the first D s; no window: the whole trace; a short trace: all of it
    first = inputs.arrivals(f"trace:{trace}", None, 1800.0, seed=0, window_s=3600.0)
    assert first.times_s.size == 15 and "busiest" not in first.source
    whole = inputs.arrivals(f"trace:{trace}", None, None, seed=0)
    assert whole.times_s.size == 180 and "simulate serve replays the whole trace" in busy.source
    # QA 40 V #11: a simulation replays all of it and names the hour a plan sizes for
    assert ", replayed whole (2.97 h, 0.0168 req/s over it; its busiest hour offers 0.0333 " in (
        whole.source
    )
    short = inputs.arrivals(f"trace:{trace}", None, None, seed=0, window_s=1e5)
    assert short.times_s.size == 180 and not short.cut and "busiest" not in short.source
    # the LLM requests: the same hour, with their lengths
    from gpucast.catalog.llm import llm_model

    kw = dict(spec=llm_model("llama-3-8b"), rate_rps=None, time_scale=None, seed=0,
              input_len=parse_token_lengths("100", "input-len"),
              output_len=parse_token_lengths("10", "output-len"))  # fmt: skip
    llm = llm_traffic(f"trace:{trace}", duration_s=None, window_s=3600.0, **kw)
    req = llm.requests
    assert req.count == 120 and req.arrival_s[0] == 0.0 and req.input_tokens.size == 120
    assert "its busiest hour (1 h in: 120 of 180 requests" in llm.source
    cut = llm_traffic(f"trace:{trace}", duration_s=1800.0, window_s=3600.0, **kw)
    assert cut.requests.count == 15 and "busiest" not in cut.source
    # a simulation replays a language model's trace whole and names the same hour, through
    # the one function (QA 40 I, left alone: the note was the CNN path's only)
    whole_llm = llm_traffic(f"trace:{trace}", duration_s=None, **kw)
    assert whole_llm.requests.count == 180
    assert whole.source.endswith(whole_llm.source.partition(", replayed whole")[2])
    assert ", replayed whole (2.97 h, 0.0168 req/s over it; its busiest hour offers 0.0333 " in (
        whole_llm.requests.source
    )
    assert "replayed whole" not in cut.source


def test_synthetic_llm_arrivals_without_a_rate_name_the_arrivals_option() -> None:
    # plan serve reads traces with field="trace", but synthetic arrivals come from --arrivals
    from gpucast.catalog.llm import llm_model
    from gpucast.domain.llm_serving import parse_token_lengths
    from gpucast.inputs.llm_serving import llm_traffic

    lengths = parse_token_lengths("10", "input-len")
    with pytest.raises(InvalidSpecError, match=r"^rate: is required with --arrivals poisson;"):
        llm_traffic("poisson", spec=llm_model("llama-3-8b"), rate_rps=None, duration_s=None,
                    time_scale=None, input_len=lengths, output_len=lengths, seed=0,
                    field="trace")  # fmt: skip


def _first(arrivals: inputs.Arrivals) -> str:
    return arrivals.warnings[0].split("; first: ", 1)[1]


def _functions_file(tmp_path: Path) -> Path:
    header = "HashOwner,HashApp,HashFunction,Trigger," + ",".join(str(i) for i in range(1, 7))
    rows = ["o1,a1,f1,http,1,0,3,0,0,2", "o1,a1,f2,timer,1,1,1,1,1,1",
            "o2,a2,f3,queue,0,0,0,0,0,10"]  # fmt: skip
    path = tmp_path / "invocations_per_function_md.anon.d01.csv"
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_function_arrivals_match_counts_per_minute(tmp_path: Path) -> None:
    parsed = read_invocation_counts(_functions_file(tmp_path))
    times = inputs.function_arrivals(parsed, np.random.default_rng(0))
    assert times.size == 22
    assert np.all(np.diff(times) >= 0)
    per_minute = np.bincount((times // 60).astype(int), minlength=parsed.minutes)
    assert list(per_minute) == list(parsed.total_per_minute())
    only_http = inputs.function_arrivals(
        parsed, np.random.default_rng(0), rows=parsed.select(trigger="http")
    )
    assert only_http.size == 6
    trace = inputs.read_trace_arrivals(_functions_file(tmp_path), seed=0)
    assert trace.times_s.size == 22 and "Azure Functions counts, 3 functions" in trace.source


def test_engines_resolve_to_their_fitted_sets() -> None:
    from gpucast.catalog.engines import inference_engine
    from gpucast.catalog.steptime import shipped_step_time_model

    model = shipped_step_time_model()
    assert model is not None and model.eta_compute_ is not None
    trt = inputs.serving_efficiency("tensorrt", "int8")
    assert (
        trt.value.compute_efficiency_tensor == inference_engine("tensorrt-llm").compute_efficiency
    )
    assert trt.value.traffic_factor == pytest.approx(model.traffic_["tuned"])
    assert trt.value.kernel_overhead_s == pytest.approx(model.overhead_s_["tuned"])
    assert "inference_engines.csv tensorrt-llm" in trt.source
    eager = inputs.serving_efficiency(None)  # the default engine
    assert eager.value.engine == "eager-pytorch"
    assert eager.value.compute_efficiency_tensor == pytest.approx(model.eta_compute_["tensor16"])
    assert eager.value.traffic_factor == 1.0
    with pytest.raises(InvalidSpecError, match="int8 is not run by eager PyTorch"):
        inputs.serving_efficiency("eager-pytorch", "int8")


def test_int8_work_is_the_fp16_profile_with_half_the_bytes() -> None:
    fp16 = inputs.inference_work("mlp", "fp16")
    int8 = inputs.inference_work("mlp", "int8")
    assert int8.matmul_flops_per_sample == fp16.matmul_flops_per_sample
    assert int8.weights_bytes == pytest.approx(fp16.weights_bytes / 2)
    with pytest.raises(InvalidSpecError, match="precision: must be one of fp32"):
        inputs.inference_work("mlp", "int4")


def test_the_default_request_is_the_model_input_at_the_serving_precision() -> None:
    """Issue #13's audit: int8 sent 301 KB (half of fp32's 602 KB) and fp16 602 KB; a
    request is the model's input tensor, floating-point elements at the serving precision
    (MLPerf's TensorRT submissions send ResNet-50 as preprocessed int8 tensors)."""
    sizes = {p: inputs.inference_work("mlp", p).input_bytes_per_sample
             for p in ("fp32", "fp16", "bf16", "int8", "fp8")}  # fmt: skip
    # 784 float features (28x28), 4 / 2 / 2 / 1 / 1 B each; the int64 label is not sent
    assert sizes == {"fp32": 3136.0, "fp16": 1568.0, "bf16": 1568.0, "int8": 784.0,
                     "fp8": 784.0}  # fmt: skip
    int8 = inputs.inference_work("mlp", "int8")
    text = inputs.payload_text(int8, "int8")
    assert text.startswith("0.784 KB per request: mlp's input tensors")
    assert "784 floating-point elements x 1 B (int8)" in text and "--input-kb" in text
    # token ids keep their size at any precision
    bert = {p: inputs.inference_work("bert-base", p).input_bytes_per_sample
            for p in ("fp32", "fp16", "int8")}  # fmt: skip
    assert len(set(bert.values())) == 1 and bert["fp32"] > 0
    ids = inputs.payload_text(inputs.inference_work("bert-base", "int8"), "int8")
    assert "B of integer inputs" in ids
    # QA 40 V #6: token ids were compared with ResNet-50's int8 tensors and a uint8 image
    assert "ResNet-50" not in ids and "image" not in ids and ids.endswith("(--input-kb to change)")


def test_rescaled_arrivals_keep_the_process_at_another_rate() -> None:
    import numpy as np

    from gpucast.simulate import arrivals as gen

    trace = np.array([0.0, 0.1, 0.3, 0.6, 1.0])  # 4 gaps in 1 s: 4 req/s
    fast = gen.rescaled(trace, 40.0, 2.0)  # 10x faster, tiled to cover 2 s
    assert fast[0] == 0.0 and np.all(np.diff(fast) > 0) and fast[-1] < 2.0
    assert fast.size / 2.0 == pytest.approx(40.0, rel=0.15)
    np.testing.assert_allclose(np.diff(fast[:5]), np.diff(trace) / 10.0)


def test_a_latency_table_says_what_it_leaves_to_extrapolation_and_what_no_device_does() -> None:
    """QA 34 C #18: a one-row table or a latency that falls with the batch was taken silently."""
    from gpucast.domain.serving import LatencyCurve
    from gpucast.inputs.serving import latency_table_warnings

    one = LatencyCurve(batch_sizes=(1,), latency_s=(0.004,), source="measured: t.csv")
    (w,) = latency_table_warnings(one, 8, "latency-table")
    assert w.startswith("latency-table: batches up to 8") and "in proportion" in w
    dips = LatencyCurve(batch_sizes=(1, 2, 4, 8), latency_s=(0.004, 0.006, 0.005, 0.012),
                        source="measured: t.csv")  # fmt: skip
    (w,) = latency_table_warnings(dips, 8, "latency-table")
    assert "falls from batch 2 to batch 4 (1 such step)" in w
    fine = LatencyCurve(batch_sizes=(1, 8), latency_s=(0.004, 0.012), source="measured: t.csv")
    assert latency_table_warnings(fine, 8, "latency-table") == []
    # QA 40 V #13: beyond a falling last segment the batches are priced flat, and said so
    falls = LatencyCurve(batch_sizes=(1, 4), latency_s=(0.01, 0.005), source="measured: t.csv")
    beyond, _ = latency_table_warnings(falls, 16, "latency-table")
    assert "priced flat at its last row's 5 ms (batch 4)" in beyond
    assert "along its last segment" not in beyond and falls.latency(16) == 0.005
    rises = latency_table_warnings(fine, 16, "latency-table")
    assert "along its last segment (batch 1 to 8)" in rises[0]


def test_a_gpu_without_an_offer_is_named_not_blamed_on_filters() -> None:
    """`plan serve --mig A30:1g.6gb` (no filter given) said "no catalog offer matches the
    filters; relax --gpu / --provider / --region / --spot", and --price did not help (QA 40 M
    #3): the error names the GPU and why; one asked GPU with offers is planned alone and the
    other is named by unserved_gpus (the app's `not planned` line)."""
    catalog = load_catalog()
    for kwargs in ({"migs": ["A30:1g.6gb"]}, {"gpus": ["A30"], "price_usd_per_gpu_hour": 1.0}):
        with pytest.raises(InvalidSpecError) as err:
            inputs.build_server_options(catalog=catalog, **kwargs)  # type: ignore[arg-type]
        text = str(err.value)
        assert "no server to plan on: A30: no catalog offer prices it" in text
        assert "relax" not in text and "simulate serve --gpu A30 --price" in text
    with pytest.raises(InvalidSpecError, match=r"gpu: no server to plan on: P4: no offer within "
                       r"--provider aws"):  # fmt: skip
        inputs.build_server_options(gpus=["P4"], providers=["aws"], no_mig=True)
    options, _ = inputs.build_server_options(migs=["A30:1g.6gb", "A100-40GB:1g.5gb"])
    assert [o.name for o in options] == ["A100-40GB/1g.5gb"]
    assert inputs.unserved_gpus(catalog, ["A30", "A100-40GB"], options) == [
        "A30: no catalog offer prices it"
    ]
