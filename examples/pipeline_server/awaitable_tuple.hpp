// The completion token of the server's coroutines: a failed operation's error comes back as a value
// (co_await returns (error, result...)), so that each step decides what a failure means for its reply.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ferry::pipeline {

inline constexpr auto awaitable_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);

}  // namespace ferry::pipeline
