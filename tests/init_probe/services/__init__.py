"""Small services the probe tests ask, each breaking one promise a file can make."""
