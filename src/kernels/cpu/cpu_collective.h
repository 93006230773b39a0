// The CPU backend's tensor-parallel group (kernels/collective.h): ranks are threads of this process.
#pragma once

#include <memory>
#include <vector>

#include "kernels/collective.h"

namespace mx::cpu {

Result<std::vector<std::shared_ptr<ops::Collective>>> make_collectives(int size, const ops::CollectiveShape& shape);

}  // namespace mx::cpu
