"""The built-in device profiles (YAML), found by name (`platform: jetson-tx2`)."""
