#include "lily/backend/backend.h"
#include "lily/error.h"

namespace lily {

void RouteLog::apply(std::vector<int32_t>& expert, std::vector<float>& weight) {
  if (mode == Mode::Record) {
    experts.push_back(expert);
    weights.push_back(weight);
    return;
  }
  if (next >= experts.size())
    throw Error("RouteLog: replaying MoE call " + std::to_string(next + 1) + " of " + std::to_string(experts.size()) +
                " recorded");
  if (experts[next].size() != expert.size())
    throw Error("RouteLog: MoE call " + std::to_string(next + 1) + " routes " + std::to_string(expert.size()) +
                " slots, the recording " + std::to_string(experts[next].size()));
  expert = experts[next];
  weight = weights[next];
  ++next;
}

}  // namespace lily
