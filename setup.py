"""The package list, found rather than listed: every package under cupyops/ (a new op folder
included), and kernels/ installed as cupyops.kernels (pyproject.toml holds everything else)."""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["cupyops", "cupyops.*"]) + ["cupyops.kernels"])
