package org.keyshared.oracle;

import java.util.Map;

final class LoadBalanceOps {
  private LoadBalanceOps() {}

  static void register(Map<String, Op> ops) {}
}
