// Asserts that a call throws exactly the expected type with a message that contains every given part.
#pragma once

#include <boost/test/unit_test.hpp>

#include <initializer_list>
#include <string>
#include <string_view>

namespace ferry::testing {

template <class Exception, class F>
void expect_error(F&& f, std::initializer_list<std::string_view> message_parts) {
  bool thrown = false;
  try {
    f();
  } catch (const Exception& error) {
    thrown = true;
    const std::string message = error.what();
    for (std::string_view part : message_parts) {
      BOOST_CHECK_MESSAGE(message.find(part) != std::string::npos,
                          "message \"" << message << "\" lacks \"" << part << "\"");
    }
  }
  BOOST_CHECK_MESSAGE(thrown, "expected an exception of the expected type");
}

}  // namespace ferry::testing
