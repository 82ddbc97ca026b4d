// Everything ferry offers.
#pragma once

#include "ferry/backend.hpp"
#include "ferry/buffers.hpp"
#include "ferry/context.hpp"
#include "ferry/error.hpp"
#include "ferry/flags.hpp"
#include "ferry/kernel_module.hpp"
#include "ferry/managed.hpp"
#include "ferry/marshal.hpp"
#include "ferry/pointers.hpp"
#include "ferry/stream.hpp"
#include "ferry/version.hpp"
#include "ferry/views.hpp"
