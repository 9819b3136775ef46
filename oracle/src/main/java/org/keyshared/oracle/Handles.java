package org.keyshared.oracle;

import java.util.HashMap;
import java.util.Map;

/** The Pulsar objects a session has made, by handle. */
final class Handles {
  private final Map<Integer, Object> objects = new HashMap<>();
  private int next = 1;

  int add(Object object) {
    objects.put(next, object);
    return next++;
  }

  <T> T get(int handle, Class<T> type) {
    Object object = objects.get(handle);
    if (object == null) {
      throw new IllegalArgumentException("args.handle: no object " + handle);
    }
    if (!type.isInstance(object)) {
      throw new IllegalArgumentException(
          "args.handle: object " + handle + " is a " + object.getClass().getSimpleName()
              + ", not a " + type.getSimpleName());
    }
    return type.cast(object);
  }

  boolean close(int handle) {
    return objects.remove(handle) != null;
  }
}
