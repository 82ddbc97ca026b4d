// The Boost.Test runner, header-only: test binaries carry it, so the GPU machine needs no Boost.
#define BOOST_TEST_MODULE ferry
#include <boost/test/included/unit_test.hpp>
