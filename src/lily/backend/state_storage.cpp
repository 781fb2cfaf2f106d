// StateStorage's defaults for a backend whose states cannot take tokens back.
#include "lily/backend/backend.h"
#include "lily/error.h"

namespace lily {

void StateStorage::throw_untakeable() {
  throw Error("this backend's sequence states cannot take back consumed tokens, which speculative decoding (--mtp) "
              "needs: run it on the CPU backend");
}

}  // namespace lily
