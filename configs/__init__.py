"""Model aliases (`<alias>.yaml`) and gate policies (`gate/<policy>.yaml`), installed as `evalctl.configs`.

Read through `evalctl.config_files`, which searches the user's EVALCTL_CONFIG_PATH folders first.
"""
