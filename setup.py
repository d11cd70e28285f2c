"""The packages to install: evalctl's own, and the repository's top-level configs/ as evalctl.configs.

configs/ stays where the product's layout puts it, beside evalctl/ (where a user of the checkout
looks for the model aliases and gate policies); mapped here, the same files install inside the
wheel, so an installed evalctl needs no checkout. One copy of each file, no generated duplicate.
Everything else about the package is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["evalctl*"]), "evalctl.configs", "evalctl.configs.gate"],
    package_dir={"evalctl.configs": "configs"},
)
