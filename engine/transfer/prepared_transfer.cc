// What every prepared transfer shares, whatever its kind: how messages name it, and the holder the API's
// templates pass it in (transfer_request).
#include "engine/transfer/prepared_transfer.hpp"

#include <memory>
#include <new>
#include <string>
#include <utility>

#include "engine/errors/check.hpp"

namespace ferry::detail {

std::string prepared_transfer::label() const {
  if (source.address == 0) return std::string(operation) + ": " + extra;  // fill, prefetch: one side
  return std::string(operation) + ": " + std::to_string(bytes) + " bytes [" + hex(source.address) + " -> " +
         hex(destination.address) + ")" + extra;
}

transfer_request::transfer_request(const transfer_request& other) {
  ::new (static_cast<void*>(storage_)) prepared_transfer(prepared_of(other));
}

transfer_request::transfer_request(transfer_request&& other) noexcept {
  ::new (static_cast<void*>(storage_)) prepared_transfer(std::move(prepared_of(other)));
}

transfer_request& transfer_request::operator=(const transfer_request& other) {
  if (this != &other) prepared_of(*this) = prepared_of(other);
  return *this;
}

transfer_request& transfer_request::operator=(transfer_request&& other) noexcept {
  if (this != &other) prepared_of(*this) = std::move(prepared_of(other));
  return *this;
}

transfer_request::~transfer_request() { std::destroy_at(&prepared_of(*this)); }

void transfer_request::hand_back_vector() noexcept { prepared_of(*this).registrable = false; }

}  // namespace ferry::detail
