// readme-block: #include <boost/asio.hpp>
// The Quick start's first program, whole: its includes, then the rest at namespace scope.
// @readme-includes@
// @readme-block@
