"""GPU prices in the catalog: on-demand US dollars per GPU-hour, each with its source."""

from __future__ import annotations

import re

import pytest

from servesim._catalogfile import CatalogError, load_builtin
from servesim.hardware.catalog import EXTRA_FIELDS, FIELDS, builtin_catalog, load_catalog

CAT = builtin_catalog()

GOOD_GPU = 'hbm_TBps = 2.0\nbf16_TFLOPS = 400\nmemory_GiB = 48\ninterconnect_GBps = 100\n'
H100 = ('hbm_TBps = 3.35\nbf16_TFLOPS = 989.4\nmemory_GiB = 79.6\ninterconnect_GBps = 450\n'
        'fp8_TFLOPS = 1978.9\n')


def test_price_fields_are_optional_extras():
    assert {"usd_per_gpu_hour", "price_source"} <= set(EXTRA_FIELDS["gpu"])
    assert not FIELDS["gpu"]["usd_per_gpu_hour"].required
    assert not FIELDS["gpu"]["price_source"].required


def test_every_shipped_gpu_is_priced():
    assert {"h100-sxm", "h200", "a100-80gb", "b200", "mi300x"} <= {
        n for n in CAT.gpus if CAT.usd_per_gpu_hour(n) is not None
    }


def test_every_shipped_price_is_positive_and_cites_a_dated_source():
    raw = load_builtin("gpus.toml")["gpu"]
    for name in CAT.gpus:
        price = CAT.usd_per_gpu_hour(name)
        if price is None:
            assert "price_source" not in raw[name], name
            continue
        assert price > 0, name
        assert price == raw[name]["usd_per_gpu_hour"], name
        source = CAT.gpu_extras[name].get("price_source", "")
        assert isinstance(source, str) and source.strip(), name
        assert re.search(r"\b20\d\d\b", source), f"{name}: the source names no year"
        assert "http" in source, f"{name}: the source names no URL"


def test_the_shipped_prices():
    # Oracle Cloud Infrastructure pay-as-you-go list prices, 8-GPU bare-metal shapes / 8
    assert {n: CAT.usd_per_gpu_hour(n) for n in ("h100-sxm", "h200", "a100-80gb", "b200", "mi300x")} == {
        "h100-sxm": 10.0, "h200": 10.0, "a100-80gb": 4.0, "b200": 14.0, "mi300x": 6.0,
    }


def test_unknown_gpu_has_no_price_but_an_error():
    with pytest.raises(CatalogError, match=r"unknown GPU 'h300'.*h100-sxm"):
        CAT.usd_per_gpu_hour("h300")


def test_a_user_catalog_overrides_the_price(tmp_path):
    f = tmp_path / "prices.toml"
    f.write_text(f'[gpu.h100-sxm]\n{H100}usd_per_gpu_hour = 2.49\n'
                 'price_source = "my provider, 1-year reserved, https://example.com, 2026-11"\n'
                 f'[gpu.l40s]\n{GOOD_GPU}usd_per_gpu_hour = 1\n'
                 f'[gpu.free]\n{GOOD_GPU}')
    cat = load_catalog(f)
    assert cat.usd_per_gpu_hour("h100-sxm") == 2.49
    assert cat.gpu_extras["h100-sxm"]["price_source"].startswith("my provider")
    assert cat.gpu_extras["h100-sxm"]["fp8_TFLOPS"] == 1978.9
    price = cat.usd_per_gpu_hour("l40s")
    assert price == 1.0 and isinstance(price, float)  # a TOML integer is taken as dollars
    assert cat.usd_per_gpu_hour("free") is None
    assert cat.usd_per_gpu_hour("h200") == CAT.usd_per_gpu_hour("h200")  # shipped ones stay
    assert CAT.usd_per_gpu_hour("h100-sxm") == 10.0  # the built-in catalog is untouched


def test_replacing_an_entry_without_a_price_drops_the_shipped_one(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(f'[gpu.h100-sxm]\n{H100}')
    cat = load_catalog(f)
    assert cat.usd_per_gpu_hour("h100-sxm") is None
    assert "price_source" not in cat.gpu_extras["h100-sxm"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("usd_per_gpu_hour = -2.5\n",
         "[gpu.x] field 'usd_per_gpu_hour': usd_per_gpu_hour=-2.5 is invalid: must be > 0"),
        ("usd_per_gpu_hour = 0\n",
         "[gpu.x] field 'usd_per_gpu_hour': usd_per_gpu_hour=0 is invalid: must be > 0"),
        ('usd_per_gpu_hour = "$3.99"\n',
         "[gpu.x] field 'usd_per_gpu_hour': usd_per_gpu_hour='$3.99' is invalid: must be a real "
         "number > 0"),
        ("usd_per_gpu_hour = true\n",
         "[gpu.x] field 'usd_per_gpu_hour': usd_per_gpu_hour=True is invalid: must be a real number"),
        ("usd_per_gpu_hour = nan\n",
         "[gpu.x] field 'usd_per_gpu_hour': usd_per_gpu_hour=nan is invalid: must be a finite number"),
        ("price_source = 3\n",
         "[gpu.x] field 'price_source': price_source=3 is invalid: must be a string"),
        ("usd_per_hour = 3\n", "[gpu.x] unknown field 'usd_per_hour' (known fields: hbm_TBps"),
    ],
)
def test_a_bad_price_names_file_entry_and_field(tmp_path, extra, expected):
    f = tmp_path / "user.toml"
    f.write_text(f"[gpu.x]\n{GOOD_GPU}{extra}")
    with pytest.raises(CatalogError) as info:
        load_catalog(f)
    msg = str(info.value)
    assert msg.startswith(f"{f}: ")
    assert expected in msg
    assert "\n" not in msg
