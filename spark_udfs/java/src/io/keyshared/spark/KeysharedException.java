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

  /**
   * What a key that is neither string nor binary is refused with, when the query is built: the
   * same words on both engines ({@code spark_udfs.udfs.key_type_error}).
   */
  public static String keyType(String function, String type) {
    return function
        + " takes a string or binary key, got "
        + type
        + ": cast the key to string or binary first, as a producer sending it as a string or"
        + " bytes key would";
  }
}
