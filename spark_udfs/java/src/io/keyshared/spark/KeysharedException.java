package io.keyshared.spark;

/** A key or argument the keyshared functions cannot use, said in words a user can act on. */
public final class KeysharedException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  public KeysharedException(String message) {
    super(message);
  }

  /** The error for a null key when no null_key was given: the Python UDFs' wording. */
  public static KeysharedException nullKey(String function) {
    return new KeysharedException(
        function
            + ": a key is null; pass null_key= (SQL: a last argument) to hash it as those bytes,"
            + " or filter null keys out first");
  }
}
