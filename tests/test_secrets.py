from evalctl.secrets import REDACTED, redact_argv, redact_config, redact_env


def test_env_values_with_key_like_names_are_redacted():
    env = {"HF_TOKEN": "t", "OPENAI_API_KEY": "k", "DB_PASSWORD": "p", "client_secret": "s", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert redact_env(env) == {**{k: REDACTED for k in env if k != "CUDA_VISIBLE_DEVICES"}, "CUDA_VISIBLE_DEVICES": "0,1"}


def test_argv_secret_option_values_are_redacted():
    argv = ["serve", "--api-key", "abc", "--port", "8000", "--hf-token=xyz", "--enable-metrics"]
    assert redact_argv(argv) == ["serve", "--api-key", REDACTED, "--port", "8000", f"--hf-token={REDACTED}", "--enable-metrics"]
    assert redact_argv(["--api-key", "--port", "1"]) == ["--api-key", "--port", "1"]  # a flag, not a value, follows


def test_config_dump_redacts_profile_env_and_args():
    dump = {
        "model": "m",
        "servers": [{"name": "a", "env": {"HF_TOKEN": "t", "OMP_NUM_THREADS": "2"}, "extra_args": ["--api-key", "k"]}],
        "variants": [{"name": "v", "extra_args": ["--token", "x"]}],
    }
    out = redact_config(dump)
    assert out["servers"][0]["env"] == {"HF_TOKEN": REDACTED, "OMP_NUM_THREADS": "2"}
    assert out["servers"][0]["extra_args"] == ["--api-key", REDACTED]
    assert out["variants"][0]["extra_args"] == ["--token", REDACTED]
    assert dump["servers"][0]["env"]["HF_TOKEN"] == "t"  # the caller's dump is untouched


def test_config_dump_redacts_variant_env_and_command_prefix():
    dump = {
        "model": "m",
        "servers": [],
        "variants": [{"name": "patched", "env": {"HF_TOKEN": "t", "CUDA_LAUNCH_BLOCKING": "1"},
                      "command_prefix": ["docker", "run", "-e", "HF_TOKEN=t", "--env", "API_KEY=k", "img"]}],
    }  # fmt: skip
    variant = redact_config(dump)["variants"][0]
    assert variant["env"] == {"HF_TOKEN": REDACTED, "CUDA_LAUNCH_BLOCKING": "1"}
    assert variant["command_prefix"] == ["docker", "run", "-e", f"HF_TOKEN={REDACTED}", "--env", f"API_KEY={REDACTED}", "img"]


def test_argv_environment_assignments_with_secret_names_are_redacted():
    argv = ["env", "HF_TOKEN=abc", "OMP_NUM_THREADS=2", "python", "-m", "server"]
    assert redact_argv(argv) == ["env", f"HF_TOKEN={REDACTED}", "OMP_NUM_THREADS=2", "python", "-m", "server"]
