#!/usr/bin/env bash
# Runs one test binary under `bazel test` for tools/ferry (--run_under=//tools/bundle:test_wrapper).
#
# Boost.Test reads its loggers from BOOST_TEST_LOGGER; Bazel names the per-test XML file in
# XML_OUTPUT_FILE. A test that writes that file itself is reported as it wrote it; otherwise Bazel
# would make up one <testcase> for the whole binary. So: human-readable log on stdout (test.log),
# JUnit (one <testcase> per Boost test case) into $XML_OUTPUT_FILE. A BOOST_TEST_LOGGER given with
# --test_env, or --logger in --test_arg, takes precedence.
set -euo pipefail
if [[ -n "${XML_OUTPUT_FILE:-}" && -z "${BOOST_TEST_LOGGER:-}" ]]; then
  export BOOST_TEST_LOGGER="HRF,message,stdout:JUNIT,message,${XML_OUTPUT_FILE}"
fi
export BOOST_TEST_COLOR_OUTPUT="${BOOST_TEST_COLOR_OUTPUT:-no}"
exec "$@"
