"""Built-in stores (``file``, ``memory``), registered through the plugin hooks like any other."""
