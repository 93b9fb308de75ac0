// Engine::set_test_hooks, defined here in test code rather than in engine/:
// the shipped binary never links it, so nothing outside tests can tamper
// with a restore or keep rejected draft rows.
#include "engine/engine.h"
#include "engine/sequence.h"

namespace sb {

void Engine::set_test_hooks(EngineTestHooks hooks) { context_->hooks = std::move(hooks); }

}  // namespace sb
